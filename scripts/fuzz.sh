#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cc) with clang + ASan + UBSan in build-fuzz and runs
# them on seed corpora made from the real files in ../shared. See docs/fuzzing.md.
#
#   scripts/fuzz.sh --smoke [SECONDS]   every target for SECONDS (default 60) each; exit 1 on
#                                       any crash, leak, timeout or sanitizer report
#   scripts/fuzz.sh --target NAME [--time SECONDS] [-- LIBFUZZER_ARGS...]
#                                       one target (e.g. artifact_fuzz), longer runs
#   scripts/fuzz.sh --build             build only
#
# The growing corpus is kept in build-fuzz/corpus/<target>; findings (crash-*, leak-*,
# timeout-*, oom-*) go to build-fuzz/findings/<target>/. Reproduce one with
#   build-fuzz/fuzz/<target> build-fuzz/findings/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${SLM_FUZZ_BUILD_DIR:-build-fuzz}
MODE=build SECONDS_PER_TARGET=60 TARGETS=() EXTRA=()
while (($#)); do
  case "$1" in
    --smoke) MODE=run; if [[ ${2:-} =~ ^[0-9]+$ ]]; then SECONDS_PER_TARGET=$2; shift; fi ;;
    --target) MODE=run; TARGETS+=("$2"); shift ;;
    --time) SECONDS_PER_TARGET=$2; shift ;;
    --build) MODE=build ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# clang and its sanitizer/libFuzzer runtime (Debian 12: clang 14). Not in scripts/setup.sh: the
# default (g++) build and test suite do not need them.
PKGS=(clang libclang-rt-14-dev python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  echo "fuzz.sh: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSLM_FUZZ=ON -DSLM_BUILD_TESTS=OFF -DSLM_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target fuzz staticlm

# Seeds: regenerated each run (cheap); the artifact is compiled once.
export ASAN_OPTIONS=detect_leaks=0
SHARED=$ROOT/../shared
if [ ! -f "$BUILD/seed-artifact/model.slm" ]; then
  mkdir -p "$BUILD/seed-artifact"
  "$BUILD/staticlm" compile "$SHARED/models/stories260K" -o "$BUILD/seed-artifact/model.slm" \
    --max-context 16 --prefill-step 4 2>/dev/null
fi
rm -rf "$BUILD/seeds"
python3 fuzz/make_seeds.py "$BUILD/seeds" "$SHARED" "$BUILD/seed-artifact/model.slm"
unset ASAN_OPTIONS

[ "$MODE" = build ] && exit 0

if ((${#TARGETS[@]} == 0)); then
  for f in fuzz/*_fuzz.cc; do TARGETS+=("$(basename "$f" .cc)"); done
fi
failed=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t" "$BUILD/seeds/$t"
  log=$BUILD/findings/$t/last-run.log
  # -malloc_limit_mb: one allocation above 1 GiB from a small input is a missing resource
  # bound, reported like a crash. -timeout: one input running 10 s is a hang.
  bin=$BUILD/fuzz/$t  # fuzz/CMakeLists.txt puts the targets in the fuzz/ subfolder
  [ -x "$bin" ] || bin=$BUILD/$t
  set +e
  "$bin" "$BUILD/corpus/$t" "$BUILD/seeds/$t" -max_total_time="$SECONDS_PER_TARGET" \
    -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 -max_len=1048576 -print_final_stats=1 \
    -artifact_prefix="$BUILD/findings/$t/" "${EXTRA[@]}" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  echo "fuzz: $t: rc=$rc, ${execs} executions in ${SECONDS_PER_TARGET}s, ${cov:-cov: ?}"
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -20 >&2 || true
    echo "fuzz: $t: see $log" >&2
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#TARGETS[@]} targets clean"
