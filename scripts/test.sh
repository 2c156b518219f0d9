#!/usr/bin/env bash
# Builds staticlm and runs the whole test suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${SLM_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
