#!/usr/bin/env bash
# Runs the whole test suite (unit, integration, doc tests), including the tests that load
# the real local models, then the suite again without the default features (no local
# models compiled in). Fetches and verifies the model files first; a second run fetches
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo test "$@"
cargo test --no-default-features "$@"
