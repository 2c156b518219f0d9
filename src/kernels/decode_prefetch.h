// Software prefetch distance of the int8 decode tiles (Q8RowTile in matmul_q-inl.h, Q8RowTile256
// and Q8Tile in matmul_q_vnni.cc) and of the AVX-512 int4 split-x tiles. A decode tile streams kN weight rows
// together and reads every weight once, so each step prefetches what it will need later: rows
// up to kDecodePrefetchBytes long the next tile's row at the same offset (a whole tile ahead, as
// all decode tiles do); longer rows kDecodePrefetchBytes further along the same row, and from
// its last kDecodePrefetchBytes on the same distance into the next tile's row (rows are
// contiguous). A whole tile ahead, K = 8192
// (down_proj) put 4 rows × 8 KB of prefetched lines, plus x, through the 48 KB L1 before their
// first use: BM_MatMulQ8 1×8192×2048 took 1.35× the time of 1×2048×8192 (the same bytes), with
// 1 KB ahead 0.95–1.1× (465–469 → 338–371 µs, runs of the same session). Used by the int4
// split-x tiles since they take 8 rows of 4 KB at a time (matmul_q4_split_x.cc); not by the
// other int4 tiles: with 4 KB rows their end-to-end decode did not gain (int4 0.90–0.96×, 8da4w
// 0.95–0.98× in a 4-round A/B, while identical int4 code read 1.00–1.14× in the next), although
// BM_MatMulQ4G32 1×8192×2048 did (545 → 482 µs). Every decode tile, x86, Highway and Arm,
// prefetches through PrefetchDecodeLine (below): into L2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slm::kernels {

inline constexpr size_t kDecodePrefetchBytes = 1024;

// How far past byte `offset` of a tile row to prefetch while reading it (the same for every row
// of the tile).
inline size_t DecodePrefetchDistance(size_t offset, size_t row_bytes, size_t rows_per_tile) {
  if (row_bytes <= kDecodePrefetchBytes) return rows_per_tile * row_bytes;
  return offset + kDecodePrefetchBytes < row_bytes ? kDecodePrefetchBytes
                                                   : (rows_per_tile - 1) * row_bytes + kDecodePrefetchBytes;
}

// Prefetches the line at p into L2, not L1 (x86 prefetcht1, Arm PRFM PLDL2KEEP): what a decode
// tile prefetches is read a whole tile later (rows up to 1 KB: 16 rows × 1 KB ahead), and tile
// rows 1–4 KB apart map to the same L1 sets, so on a 32 KB 8-way L1 (Zen 4) the tile being read
// and the next one's prefetched lines fill every way of their sets and evict each other before
// use. From L2 the loads' latency is covered by the tile's other rows. Zen 4 (EPYC 9004, 2
// threads, 1B artifacts, `bench -p 8 -n 48 -r 3`, 2 alternated rounds, prefetcht0 → prefetcht1):
// int4 decode 16.4 / 14.3 → 22.3 / 19.1 tok/s, 8da4w 17.9 / 18.4 → 32.1 / 30.7, 8da8w 14.0 / 14.9
// → 19.0 / 19.3. Zen 5 (48 KB 12-way L1), the same A/B once every tile prefetches (3 rounds):
// int8 39.7 / 44.1 / 26.8 → 38.3 / 46.6 / 25.8, f32 13.7 / 9.3 / 13.3 → 14.1 / 14.3 / 13.3,
// 8da8w 41.0 / 24.4 / 37.3 → 40.3 / 25.3 / 34.7 — within this VM's noise. Not measured on Arm.
//
// always_inline: a plain inline function was not inlined into the Highway decode tiles (compiled
// under Highway's `#pragma GCC target`), and GCC, which sees a prefetch as free of side effects,
// then deleted the calls: from a1de3c0 to the fix the f32, int8 and int4 Highway tiles and the
// int4 planes tile prefetched nothing (their Zen 4 "prefetcht1" figures of that session were
// without prefetch; Zen 5 int8 decode 29.5 / 29.9 / 20.7 tok/s without, 38.3 / 46.6 / 25.8 with).
// tests/kernels/decode_prefetch_codegen.sh checks the built kernels still hold the instruction.
[[gnu::always_inline]] inline void PrefetchDecodeLine(const void* p) {
  __builtin_prefetch(p, /*rw=*/0, /*locality=*/2);
}

// Prefetches the line at p into L1 (x86 prefetcht0, Arm PRFM PLDL1KEEP): only the int8
// weight-only Highway tile (Q8RowTile in matmul_q-inl.h), and only where Q8DecodePrefetchIntoL1()
// says the L1 can hold what it prefetches. That tile reads each 64-byte line of a weight row as
// four 16-byte widening loads (int8 → int32); with the line in L2 each of them waits on the L1
// fill, with the line in L1 they don't. Zen 5 (48 KB 12-way L1), 1B int8 decode, 2 threads, 7
// alternated rounds: 1.03–1.22× faster with prefetcht0 (docs/benchmarks.md, thirty-third
// session). The AVX-512 tiles of the other schemes load whole lines (or 32 bytes) at a time and
// keep prefetcht1: with prefetcht0 for every tile, int4, 8da4w and 8da8w decode did not gain on
// Zen 5 (3 rounds each), and those three lost on Zen 4 (above).
[[gnu::always_inline]] inline void PrefetchDecodeLineToL1(const void* p) {
  __builtin_prefetch(p, /*rw=*/0, /*locality=*/3);
}

// Whether an L1 data cache of `bytes` with `ways` ways (0: unknown) holds a Q8RowTile's lines
// and the next tile's, prefetched a tile ahead: with rows of 2 KB (K = 2048) the 8 rows of a
// tile and the 8 of the next at the same offset fall into 2 sets of a cache with 4 KB per way
// (64 sets of 64-byte lines), 8 lines in each, beside x's lines — more than 8 ways are needed.
// True from 12 ways and 48 KB (Zen 5, Intel cores since Sunny Cove); false for Zen 4's 32 KB
// 8-way L1, where prefetcht0 cost the int4, 8da4w and 8da8w tiles 1.3–1.8× (above; the int8
// tile was not measured there with an L1 prefetch), and when unknown.
bool L1HoldsQ8DecodePrefetch(long bytes, long ways);

// L1HoldsQ8DecodePrefetch for this CPU's L1 data cache (sysconf; unknown counts as no),
// probed once; SLM_DISABLE_L1_DECODE_PREFETCH=1 makes it false (to measure the L2 prefetch).
bool Q8DecodePrefetchIntoL1();
void SetQ8DecodePrefetchIntoL1EnabledForTest(bool enabled);

// The address to prefetch while reading byte `offset` of a tile row, at `p`.
inline const void* DecodePrefetchAddress(const void* p, size_t offset, size_t row_bytes, size_t rows_per_tile) {
  return static_cast<const uint8_t*>(p) + DecodePrefetchDistance(offset, row_bytes, rows_per_tile);
}

}  // namespace slm::kernels
