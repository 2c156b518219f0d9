#!/usr/bin/env bash
# Builds staticlm and runs the whole test suite with CTest.
#   scripts/test.sh              normal build (build/ or $SLM_BUILD_DIR)
#   scripts/test.sh --sanitize   ASan + UBSan build of everything in build-asan/ (or
#                                $SLM_ASAN_BUILD_DIR), the same suite; any report fails a test
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  export SLM_BUILD_DIR=${SLM_ASAN_BUILD_DIR:-build-asan}
  export SLM_CMAKE_ARGS="${SLM_CMAKE_ARGS:-} -DSLM_SANITIZE=ON -DSLM_BUILD_BENCH=OFF"
  # halt_on_error: the first report fails the test; leaks are reported at exit.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
bash scripts/build.sh
cd "${SLM_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
