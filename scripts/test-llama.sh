#!/usr/bin/env bash
# The tests of the llama.cpp provider (feature `llama`: tests/models/llama.rs) through the
# real model. Kept out of scripts/test.sh, whose budget building llama.cpp (about 4 to 5
# minutes on two cores) would break; .ci/run runs both. Installs cmake, a C++ compiler and
# libclang first when they are missing (scripts/llama-deps.sh), and fetches the models.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/llama-deps.sh
scripts/fetch-models.sh
source scripts/build-env.sh
# The suite's features plus llama: only memlane, llama.cpp and the models binary are built
# again after scripts/test.sh.
cargo test --features postgres,rig,llama --test models "$@" -- llama::
