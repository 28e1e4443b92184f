#!/usr/bin/env bash
# Runs the whole test suite (unit, integration, doc tests), including the tests that load
# the real local models. Fetches and verifies the model files first; a second run fetches
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
source scripts/build-env.sh
# The PostgreSQL store's suites run against a throwaway server (scripts/postgres.sh: the
# PyPI package pgserver, PostgreSQL 16 with pgvector), stopped when this script exits. A
# server of your own: set MEMLANE_TEST_POSTGRES to its connection string instead.
if [ -z "${MEMLANE_TEST_POSTGRES:-}" ]; then
  pg_dir=$(mktemp -d -t memlane-pg.XXXXXX)
  rmdir "$pg_dir"
  trap 'scripts/postgres.sh stop "$pg_dir"' EXIT
  MEMLANE_TEST_POSTGRES=$(scripts/postgres.sh start "$pg_dir" $$)
  export MEMLANE_TEST_POSTGRES
fi
# Every test target of both crates (memlane and its kernels, `kernels/`), with the
# examples built once each, in test mode (a plain `cargo test` builds the two evaluation
# examples twice: as examples and as test harnesses), then the doc tests, which cargo runs
# only on their own when targets are named.
cargo test --workspace --features postgres,rig --lib --tests --examples "$@"
cargo test --workspace --features postgres,rig --doc "$@"
