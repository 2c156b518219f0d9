#!/usr/bin/env bash
# Nightly-style long run of tests/hostile/soak_test.cc: TOKENS tokens (default 100000) per model
# through resets, forks and snapshot restores, on the normal build (RSS is only checked
# outside ASan). CI runs the same test with its default of 3000 tokens.
#   scripts/soak.sh [TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
TOKENS=${1:-100000}
bash scripts/build.sh --target test_hostile
SLM_SOAK_TOKENS=$TOKENS "${SLM_BUILD_DIR:-build}/test_hostile" --gtest_filter='Soak.*'
