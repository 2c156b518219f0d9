// Which weight rows a decode tile streams together. A decode tile reads kN weight rows at once,
// each a stream from memory. Rows of one matrix are contiguous, so kN adjacent rows shorter than
// 4 KB are several streams inside one 4 KB page — and hardware prefetchers track streams per
// page: Intel's L2 streamer one forward and one backward stream per 4 KB page (Intel
// optimization manual), and Zen 2 measured alike. There a loads-only walk of 1 KB rows read 4 or
// 8 at a time streamed 8.6–8.8 GB/s on one core and 15.4–15.6 GB/s with the rows 4 KB apart,
// 2 cores 17.0 → 29.4 GB/s (docs/benchmarks.md, thirty-seventh session). So the AVX2 decode
// tiles of the int8 weight-only, 8da8w, 8da4w and (16-bit x) int4 weight-only products take rows
// `spread` = 4096 / row bytes apart: each row of a tile has a page of its own, and the next
// `spread − 1` tiles continue the same pages' streams. Zen 2, 1B decode on 2 threads: int8
// 1.18–1.32×, 8da4w 1.30–1.33×, int4 with the 16-bit x tile (matmul_q4_x16-inl.h; its walk 12.2
// → 13.1 GB/s on 1 thread, 23.7 → 25.1 on 2) 35.2–35.9 → 37.8 tok/s. Not the default int4 tile
// (f32 planes, matmul_q4_planes256-inl.h), compute-bound enough that spreading its rows cost
// 8%: its walk read 7.4 against 7.9 GB/s on one thread, 1B int4 decode 21.8–21.9 against
// 23.7–23.9 tok/s. Only the AVX2 target takes rows apart: no other CPU has been measured.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace slm::kernels {

inline constexpr size_t kDecodePageBytes = 4096;

// Rows between the rows of one decode tile for rows of row_bytes: one per 4 KB page (at most 16;
// 1 from 4 KB rows on).
inline size_t DecodeRowSpread(size_t row_bytes) {
  return std::clamp<size_t>(kDecodePageBytes / std::max<size_t>(row_bytes, 1), 1, 16);
}

// Covers weight rows [n_begin, n_end): blocks of kN · spread rows as `spread` tiles of kN rows
// `spread` apart (tile i of a block: rows i, i + spread, ...), then tiles of kN adjacent rows,
// then single rows. tile(rows, c, stride, next), rows an std::integral_constant<size_t, kN or 1>:
// the tile of rows c, c + stride, ..., c + (rows − 1) · stride; next: rows from each of them to
// the row at its place in the next tile (what it prefetches; a single row's is c + 1). Every row's
// own arithmetic is the tile's whatever rows share it, so the order changes no bits.
template <size_t kN, typename Tile>
[[gnu::always_inline]] inline void ForEachDecodeTile(size_t n_begin, size_t n_end, size_t spread, Tile&& tile) {
  const std::integral_constant<size_t, kN> rows;
  const std::integral_constant<size_t, 1> one;
  size_t c = n_begin;
  if (spread > 1) {
    for (; c + kN * spread <= n_end; c += kN * spread - spread) {
      for (size_t i = 0; i < spread; ++i, ++c) tile(rows, c, spread, i + 1 < spread ? size_t{1} : kN * spread - i);
    }
  }
  for (; c + kN <= n_end; c += kN) tile(rows, c, size_t{1}, kN);
  for (; c < n_end; ++c) tile(one, c, size_t{1}, size_t{1});
}

}  // namespace slm::kernels
