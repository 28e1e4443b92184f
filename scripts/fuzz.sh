#!/usr/bin/env bash
# Runs one fuzz target for a while (default 10 minutes):
#   scripts/fuzz.sh filter|model_output [seconds]
# Needs the nightly toolchain; installs cargo-fuzz from crates.io if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?"which target: filter or model_output"}
seconds=${2:-600}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
extra=()
[ -f "fuzz/$target.dict" ] && extra+=("-dict=fuzz/$target.dict")
mkdir -p "fuzz/corpus/$target"
exec cargo +nightly fuzz run "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 "${extra[@]}"
