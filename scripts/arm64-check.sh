#!/usr/bin/env bash
# Cross-builds staticlm for 64-bit Arm Linux (aarch64) on a Debian 12 amd64 machine and runs its
# tests under qemu-user, so the NEON kernels and the other non-x86 code paths can be checked
# without Arm hardware (cmake/aarch64-linux-gnu.cmake explains the cross setup).
#   scripts/arm64-check.sh                        every test of every test binary
#   scripts/arm64-check.sh 'AllModels/Conformance.*'   a gtest filter, applied to every binary
# Build folder: build-arm64/ (or $SLM_ARM64_BUILD_DIR); build type $SLM_BUILD_TYPE
# (RelWithDebInfo); extra cmake options in $SLM_CMAKE_ARGS. Logs: <build>/arm64-logs/<binary>.log.
# Exit status non-zero if the build or any test fails.
#
# Packages, installed only when missing (apt-get update only then too): the host's build tools
# (scripts/setup.sh), g++-aarch64-linux-gnu, qemu-user and the arm64 -dev packages that are
# Multi-Arch: same. Debian 12's libsentencepiece-dev, libsentencepiece0 and libyaml-cpp-dev are
# not: installing their :arm64 packages would REMOVE the amd64 ones the native build needs. They
# are downloaded and unpacked (dpkg-deb -x) into <build>/deps-arm64 instead, never installed, and
# every apt-get install is simulated first and refused if apt would remove any package.
#
# The binaries run as `qemu-aarch64 -L /`: they load the multiarch libc6:arm64, whose loader must
# be the same glibc build (the cross sysroot's /usr/aarch64-linux-gnu loader hangs in
# pthread_create). Tests that start the CLI or re-execute themselves go through the emulator
# without binfmt_misc where the build can (CMakeLists.txt); the cases that can't pass under
# qemu-user whatever the code does are left out, listed in SLM_ARM64_SKIP (see below;
# SLM_ARM64_SKIP='' runs them too).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC_DIR=$PWD
BUILD_DIR=${SLM_ARM64_BUILD_DIR:-build-arm64}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
DEPS_DIR=$BUILD_DIR/deps-arm64
FILTER=${1:-}

# Emulator-only failures (they pass on a real aarch64 kernel):
# - qemu-user returns 0 for the guest's madvise(MADV_HUGEPAGE) but doesn't pass it on, so the
#   mapping never gets the "hg" flag the test looks for;
# - a threadsafe death test re-executes the test binary with execv, which the host kernel can't
#   do for an aarch64 ELF without binfmt_misc (Exec format error).
SKIP_DEFAULT="MappedFile.LargeFilesAskForHugePagesMappedOrRead"
SKIP_DEFAULT+=":FileAccessReadDeathTest.EnvironmentVariableSelectsReadingAndTheSetterOverridesIt"
SKIP=${SLM_ARM64_SKIP-$SKIP_DEFAULT}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# --- packages ---------------------------------------------------------------------------------
bash scripts/setup.sh  # host tools and headers the cross build uses too (cmake, ninja, flatc, ...)

updated=0
apt_update() {
  if [ "$updated" = 0 ]; then $SUDO apt-get update -qq; updated=1; fi
}
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "arm64-check: dpkg --add-architecture arm64" >&2
  $SUDO dpkg --add-architecture arm64
  apt_update
fi

# Multi-Arch: same (or host) packages only: these install beside the amd64 ones.
PKGS=(g++-aarch64-linux-gnu qemu-user
      libc6:arm64 libstdc++6:arm64 libhwy-dev:arm64 libflatbuffers-dev:arm64 libxxhash-dev:arm64
      libpcre2-dev:arm64 libicu-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
      libyaml-cpp0.7:arm64)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt_update
  # Refuse anything that would remove or replace an installed package (apt says "Remv").
  if sim=$(apt-get -s install --no-install-recommends "${missing[@]}" 2>&1) &&
     ! grep -q '^Remv' <<<"$sim"; then
    echo "arm64-check: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    echo "arm64-check: refusing to install ${missing[*]}: apt would remove packages or failed:" >&2
    grep -E '^(Remv|E:)' <<<"$sim" >&2 || true
    exit 1
  fi
fi

# Not Multi-Arch: same: unpacked into a private root (cmake -DSLM_CROSS_EXTRA_ROOT), not installed.
ARM_LIB=$DEPS_DIR/usr/lib/aarch64-linux-gnu
if [ ! -e "$ARM_LIB/libsentencepiece.so.0" ] || [ ! -e "$ARM_LIB/libyaml-cpp.so" ] ||
   [ ! -e "$DEPS_DIR/usr/include/sentencepiece_processor.h" ] ||
   [ ! -e "$DEPS_DIR/usr/include/yaml-cpp/yaml.h" ]; then
  if ! apt-cache show libsentencepiece-dev:arm64 >/dev/null 2>&1; then apt_update; fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # apt-get download run as root fetches as the _apt user, which must be able to write there.
  if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
  echo "arm64-check: unpacking libsentencepiece-dev, libsentencepiece0, libyaml-cpp-dev (arm64) into $DEPS_DIR" >&2
  (cd "$tmp" && apt-get download -qq libsentencepiece-dev:arm64 libsentencepiece0:arm64 \
     libyaml-cpp-dev:arm64)
  mkdir -p "$DEPS_DIR"
  for f in "$tmp"/*.deb; do dpkg-deb -x "$f" "$DEPS_DIR"; done
fi
# libyaml-cpp-dev's libyaml-cpp.so points at the runtime of libyaml-cpp0.7:arm64 (installed).
for so in /usr/lib/aarch64-linux-gnu/libyaml-cpp.so.0.7*; do
  ln -sf "$so" "$ARM_LIB/"
done

# --- build ------------------------------------------------------------------------------------
# shellcheck disable=SC2086
cmake --no-warn-unused-cli -S "$SRC_DIR" -B "$BUILD_DIR" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DSLM_CROSS_EXTRA_ROOT="$DEPS_DIR" -DCMAKE_BUILD_TYPE="${SLM_BUILD_TYPE:-RelWithDebInfo}" \
  -DSLM_BUILD_BENCH=OFF ${SLM_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"

# --- tests ------------------------------------------------------------------------------------
# Each test binary once, all its (filtered) tests in one process, working directory the build
# folder (as under ctest), two or more binaries at a time; the longest first.
cd "$BUILD_DIR"
mkdir -p arm64-logs
gfilter=$FILTER
if [ -n "$SKIP" ]; then
  if [[ "$gfilter" == *-* ]]; then gfilter+=":$SKIP"; else gfilter="${gfilter:-*}-$SKIP"; fi
fi
binaries=$(find . -maxdepth 1 -name 'test_*' -type f -perm -u+x -printf '%f\n' |
           awk '{print ($0 ~ /^test_(quant|llm|e2e)$/ ? 0 : $0 ~ /^test_pipeline$/ ? 1 : 2), $0}' |
           sort | cut -d' ' -f2)
if [ -z "$binaries" ]; then echo "arm64-check: no test binaries in $BUILD_DIR" >&2; exit 1; fi
export GFILTER=${gfilter:-*}
status=0
# shellcheck disable=SC2016
printf '%s\n' "$binaries" | xargs -P "$(nproc)" -I{} bash -c '
  start=$SECONDS
  if qemu-aarch64 -L / ./{} --gtest_filter="$GFILTER" > arm64-logs/{}.log 2>&1; then
    skipped=$(grep -o "^\[  SKIPPED \] [0-9]* tests\?," arm64-logs/{}.log | grep -o "[0-9]*")
    echo "arm64: {} passed ($(grep -ho "[0-9]* tests\? from [0-9]* test suites\? ran" arm64-logs/{}.log), ${skipped:-0} skipped, $((SECONDS - start)) s)"
  else
    echo "arm64: {} FAILED ($((SECONDS - start)) s); failures in $PWD/arm64-logs/{}.log:" >&2
    grep -E "^\[  FAILED  \] .*\(|^\[  FAILED  \] [0-9]+ tests?" arm64-logs/{}.log >&2 || tail -n 40 arm64-logs/{}.log >&2
    exit 1  # not 255: xargs would stop starting the other binaries
  fi' || status=1
# SVE vector lengths. qemu-user's `max` CPU (the default) has SVE2 with 512-bit vectors, where
# Highway dispatches to its SVE2 target and the per-target tests also run SVE and NEON; the
# SVE_256 and SVE2_128 targets exist only at 256- and 128-bit vectors. The per-target kernel
# tests and the whole-model per-target tests run again at those lengths (and 2048 bits, the
# longest SVE allows), when no filter was given.
if [ -z "$FILTER" ]; then
  for bytes in 32 16 256; do
    for t in "test_kernels *" "test_quant */SimdTarget*"; do
      bin=${t%% *} filter=${t#* }
      log=arm64-logs/$bin.sve$((bytes * 8)).log
      start=$SECONDS
      if qemu-aarch64 -L / -cpu "max,sve-default-vector-length=$bytes" "./$bin" \
           --gtest_filter="$filter" > "$log" 2>&1; then
        echo "arm64: $bin '$filter' with $((bytes * 8))-bit SVE passed ($(grep -ho "[0-9]* tests\? from [0-9]* test suites\? ran" "$log"), $((SECONDS - start)) s)"
      else
        echo "arm64: $bin '$filter' with $((bytes * 8))-bit SVE FAILED; see $PWD/$log" >&2
        grep -E "^\[  FAILED  \] .*\(" "$log" >&2 || tail -n 40 "$log" >&2
        status=1
      fi
    done
  done
fi
# The test that isn't a gtest (the fuzzers' regression corpus), when no filter was given.
if [ -z "$FILTER" ] && ctest -N -R '^FuzzRegressions' | grep -q 'Test *#'; then
  if ctest --output-on-failure -R '^FuzzRegressions' > arm64-logs/ctest_fuzz.log 2>&1; then
    echo "arm64: ctest FuzzRegressions passed"
  else
    echo "arm64: ctest FuzzRegressions FAILED; see $PWD/arm64-logs/ctest_fuzz.log" >&2; status=1
  fi
fi
# The machine-code check of the decode tiles' prefetches (an objdump of the aarch64 library, no
# emulator), when no filter was given.
if [ -z "$FILTER" ] && ctest -N -R '^KernelsCodegen' | grep -q 'Test *#'; then
  if ctest --output-on-failure -R '^KernelsCodegen' > arm64-logs/ctest_codegen.log 2>&1; then
    echo "arm64: ctest KernelsCodegen passed"
  else
    echo "arm64: ctest KernelsCodegen FAILED; see $PWD/arm64-logs/ctest_codegen.log" >&2; status=1
  fi
fi
if [ "$status" != 0 ]; then echo "arm64-check: FAILED" >&2; else echo "arm64-check: all passed"; fi
exit "$status"
