#!/usr/bin/env bash
# Runs the whole test suite (unit, integration, doc tests), including the tests that load
# the real local models. Fetches and verifies the model files first; a second run fetches
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
# A faster linker: the suite links a few large test binaries (candle is in each), and lld
# (from Debian's packages, fetched here when it can be) links them several times faster
# than the system's default. Without it the default linker does the same job.
if ! command -v ld.lld >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q lld >/dev/null 2>&1 || true
fi
if command -v ld.lld >/dev/null; then
  # RUSTFLAGS replaces .cargo/config.toml's flags, so the target CPU is repeated here.
  export RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=x86-64-v3 -C link-arg=-fuse-ld=lld"
fi
# Every test target, with the examples built once each, in test mode (a plain `cargo
# test` builds the two evaluation examples twice: as examples and as test harnesses), then
# the doc tests, which cargo runs only on their own when targets are named.
cargo test --lib --tests --examples "$@"
cargo test --doc "$@"
