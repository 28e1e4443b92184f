#!/usr/bin/env bash
# Installs what the feature `llama` needs to build llama.cpp from the source its crate
# ships: cmake, a C++ compiler and libclang (for its bindings), from Debian's packages.
# Does nothing when they are already there.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v c++ >/dev/null || need+=(g++)
# bindgen loads libclang.so; libclang-cpp, which some images have without it, is another library.
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "the feature llama needs ${need[*]}: run this script as root, or install them" >&2
    exit 1
fi
echo "installing ${need[*]} for llama.cpp" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
