#!/usr/bin/env bash
# Runs the whole test suite (unit, integration, doc tests), including the tests that load
# the real local models. Fetches and verifies the model files first; a second run fetches
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo test "$@"
