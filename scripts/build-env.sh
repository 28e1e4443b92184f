# Sourced by the test scripts: the build settings the suite is measured with.
#
# A faster linker: the suite links a few large test binaries (candle is in each), and lld
# (from Debian's packages, fetched here when it can be) links them several times faster
# than the system's default. Without it the default linker does the same job.
if ! command -v ld.lld >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q lld >/dev/null 2>&1 || true
fi
# Sourced twice (by .ci/run, then by the test scripts it runs), it adds the flags once: the
# flags are part of what cargo reuses a build by, and the same flags written twice would
# build everything again.
if command -v ld.lld >/dev/null && [[ "${RUSTFLAGS:-}" != *-fuse-ld=lld* ]]; then
  # RUSTFLAGS replaces .cargo/config.toml's flags, so the target CPU is repeated here.
  export RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=x86-64-v3 -C link-arg=-fuse-ld=lld"
fi
# llama.cpp without its `common` library, which memlane does not use, and its own sources
# (not ggml's kernels) at -O1 (the file says why); a CMAKE_PROJECT_INCLUDE of your own is
# kept.
if [ -z "${CMAKE_PROJECT_INCLUDE:-}" ]; then
  export CMAKE_PROJECT_INCLUDE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/llama-without-common.cmake"
fi
