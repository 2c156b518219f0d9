#!/usr/bin/env bash
# Checks that the decode tiles' software prefetches survived compilation: every Highway target's
# MatMulF32Columns, MatMulQ8Columns, MatMulQ4Columns and MatMulQ4DynColumns (and on x86 the int4
# planes tiles, Q4PlanesColumns and Q4Planes256Columns, every instance of the AVX2 8da4w decode
# tile's row driver, Q4Dyn256Rows, the AVX2 MatMulQ8DynColumns (its 8da8w decode tile), every
# decode tile lambda compiled out of line (the callables ForEachDecodeTile calls, e.g. the AVX2
# int8 tiles of Q8RowTiles and the 16-bit x int4 tiles of Q4X16Rows), and the AMX panel's
# next-block prefetch,
# MatMulQ8DynPanelAmx, where the build has it: the stub of builds without the AMX panel, e.g.
# aarch64, holds no tile instruction and is not checked) in the kernels library holds at least one
# L2 prefetch (x86 prefetcht1, Arm PRFM PLDL2KEEP: decode_prefetch.h), and MatMulQ8Columns also an
# L1 prefetch (prefetcht0, PRFM PLDL1KEEP: its tile's variant for CPUs whose L1 holds a tile
# ahead).
# Why a test of the machine code: GCC once deleted every PrefetchDecodeLine call from these
# functions without a warning (not inlined, then removed as a call without side effects), which
# cost Zen 5 int8 decode ~1.3–1.5×, and no test of results can see a missing prefetch.
#   decode_prefetch_codegen.sh OBJDUMP LIBRARY
# Exit 0: every function found holds one; 1: one does not, or none was found; 77: an
# architecture without a known L2 prefetch instruction (CTest: skipped).
set -euo pipefail
objdump=$1
library=$2
case "$("$objdump" -f "$library" | awk '/architecture:/ {print $2; exit}')" in
  i386:x86-64*) prefetch='prefetcht1' l1_prefetch='prefetcht0' ;;
  aarch64*) prefetch='prfm[[:space:]]+pldl2keep' l1_prefetch='prfm[[:space:]]+pldl1keep' ;;
  *) echo "no L2 prefetch instruction known for this architecture: skipped"; exit 77 ;;
esac
"$objdump" -d --no-show-raw-insn -C "$library" | awk -v prefetch="$prefetch" -v l1_prefetch="$l1_prefetch" '
  # A function header: "<address> <name(args)>:", or a decode tile lambda inside one.
  # Highway targets live in namespaces N_<TARGET>.
  / <.*>:$/ {
    finish()
    current = ""
    if (match($0, / <(void )?slm::kernels::N_[A-Z0-9_]+::(MatMul(F32|Q8|Q4|Q4Dyn)Columns|Q4Planes(256)?Columns|Q4Dyn256Rows)[(<]/) ||
        match($0, / <slm::kernels::N_AVX2::MatMulQ8DynColumns\(/) ||
        match($0, / <slm::kernels::MatMulQ8DynPanelAmx\(/)) {
      current = substr($0, RSTART, RLENGTH)  # " <slm::kernels::N_AVX3::MatMulQ8Columns("
      sub(/^ <(void )?slm::kernels::/, "", current)
      sub(/[(<]$/, "", current)
    } else if ($0 ~ /::\{lambda\(auto:1, unsigned long, unsigned long, unsigned long\)#1\}::operator\(\)/ &&
               match($0, / <auto slm::kernels::N_[A-Z0-9_]+::[A-Za-z0-9_]+(<(true|false)>)?/)) {
      # A decode tile callable that ForEachDecodeTile (decode_row_order.h) calls, compiled out of
      # line: tile(rows, c, stride, next). It holds the loop of the tile and so its prefetches, L2
      # ones or, for the variants that prefetch into L1 (Q8RowTiles<true>), L1 ones.
      current = substr($0, RSTART, RLENGTH) " tile lambda"
      sub(/^ <auto slm::kernels::/, "", current)
    }
    if (current != "") {
      found++
      hits = 0
      l1_hits = 0
      tile_ops = 0
    }
    next
  }
  current != "" && $0 ~ prefetch { hits++ }
  current != "" && $0 ~ l1_prefetch { l1_hits++ }
  current != "" && $0 ~ /(tdpbssd|tileloadd|ldtilecfg)/ { tile_ops++ }
  function finish() {
    if (current == "") return
    if (current == "MatMulQ8DynPanelAmx" && tile_ops == 0) {
      print current ": no AMX tile instruction (a build without the AMX panel): not checked"
      return
    }
    if (current ~ /tile lambda$/) {
      if (hits + l1_hits == 0) { print "no prefetch in " current; bad++ }
      else print current ": " hits " L2 and " l1_hits " L1 prefetches"
      return
    }
    if (hits == 0) { print "no L2 prefetch in " current; bad++ }
    else print current ": " hits " L2 prefetches"
    if (current ~ /::MatMulQ8Columns$/) {
      if (l1_hits == 0) { print "no L1 prefetch in " current; bad++ }
      else print current ": " l1_hits " L1 prefetches"
    }
  }
  END {
    finish()
    if (found == 0) { print "none of the decode products found in the library"; exit 1 }
    exit bad > 0 ? 1 : 0
  }'
