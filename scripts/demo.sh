#!/usr/bin/env bash
# The demo: builds staticlm, compiles the bundled stories260K checkpoint into one artifact,
# shows what is inside, and generates a story with stats (load, TTFT, tok/s, peak RSS).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SLM_BUILD_DIR:-build}
bash scripts/build.sh --target staticlm >/dev/null
SLM="$BUILD_DIR/staticlm"
mkdir -p out
echo "== compile models/stories260K -> out/stories260K.slm"
"$SLM" compile models/stories260K -o out/stories260K.slm --prefill-step 32
echo "== inspect (methods and signatures)"
"$SLM" inspect out/stories260K.slm | sed -n '/^method/,/^constants/p'
echo "== run (greedy, 200 tokens)"
"$SLM" run out/stories260K.slm -p "Once upon a time" -n 200
echo "== run (sampled: temp 0.8, top-p 0.9, seed 42)"
"$SLM" run out/stories260K.slm -p "Lily and Tom" -n 120 --temp 0.8 --top-p 0.9 --seed 42
