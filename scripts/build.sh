#!/usr/bin/env bash
# Configures and builds staticlm into build/ (or $SLM_BUILD_DIR; cmake options in $SLM_CMAKE_ARGS).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SLM_BUILD_DIR:-build}
bash scripts/setup.sh
# Arguments: extra cmake --build arguments (e.g. --target staticlm).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${SLM_BUILD_TYPE:-RelWithDebInfo} ${SLM_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
