#!/usr/bin/env bash
# The demo: builds staticlm, compiles the bundled stories260K checkpoint into one artifact,
# shows what is inside, and generates a story with stats (load, TTFT, tok/s, peak RSS); then runs
# the same model through the whole GenAI pipeline (configs/stories260k.yaml): prepare → quantize →
# compile → infer → eval, printing generated text, speed, perplexity and SQNR, and a second time
# to show every stage reused.
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
echo "== pipeline run configs/stories260k.yaml (all stages)"
"$SLM" pipeline run configs/stories260k.yaml --force
echo "== pipeline run again (nothing changed: every stage reused)"
"$SLM" pipeline run configs/stories260k.yaml -q | tail -n 1
echo "== report: out/pipeline/stories260k/report.html, trace: out/pipeline/stories260k/trace.json (open in ui.perfetto.dev)"
