// Software prefetch distance of the int8 decode tiles (Q8RowTile in matmul_q-inl.h, Q8Tile in
// matmul_q_vnni.cc) and of the AVX-512 int4 split-x tiles. A decode tile streams kN weight rows
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
// BM_MatMulQ4G32 1×8192×2048 did (545 → 482 µs).
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

// The address to prefetch while reading byte `offset` of a tile row, at `p`.
inline const void* DecodePrefetchAddress(const void* p, size_t offset, size_t row_bytes, size_t rows_per_tile) {
  return static_cast<const uint8_t*>(p) + DecodePrefetchDistance(offset, row_bytes, rows_per_tile);
}

}  // namespace slm::kernels
