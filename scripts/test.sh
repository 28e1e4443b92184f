#!/usr/bin/env bash
# Runs the whole test suite (unit, integration, doc tests), including the tests that load
# the real local models. Fetches and verifies the model files first; a second run fetches
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
# Every test target, with the examples built once each, in test mode (a plain `cargo
# test` builds the two evaluation examples twice: as examples and as test harnesses), then
# the doc tests, which cargo runs only on their own when targets are named.
cargo test --lib --tests --examples "$@"
cargo test --doc "$@"
