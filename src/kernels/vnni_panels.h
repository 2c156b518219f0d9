// Plumbing shared by the int8 panel GEMMs of the dynamic-activation products: the AVX-512 VNNI
// panels (matmul_q_vnni_panel.cc, panels of 32 rows) and the AVX-VNNI ones
// (matmul_q_avxvnni_panel.cc, 16 rows). Their register code differs with the vector width; the
// arguments, scratch layout, padding, prefetch range and write-back below do not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace slm::kernels::vnni {

inline size_t Align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Bytes from row to row of the unpacked weight slab. A tile step reads 4 bytes at the same k of
// every row: with a power-of-two K (8192) the rows' lines all fall into one L1 set, and 12 rows
// (Q8) plus the activation lines exceed its 12 ways; one line of padding spreads them out
// (8da8w prefill: down_proj took 1.21–1.32× gate_proj's time at the same FLOPs, 0.99–1.02× padded).
inline size_t SlabStride(size_t K) { return K + 64; }

// dst[padded] = src[rows] followed by zeros: per-row factors sized to whole panels, so a tile
// loads its panel's of them as vectors.
template <class T>
void PadToPanels(const T* src, size_t rows, size_t padded, T* dst) {
  for (size_t r = 0; r < padded; ++r) dst[r] = r < rows ? src[r] : T(0);
}

// gs[(p·groups + g)·kP + j] = group_sums[(p·kP + j)·groups + g] ([R, groups] → per panel
// [groups][kP]), zeros past R.
template <size_t kP>
void GroupSumsToPanels(const int32_t* group_sums, size_t rows, size_t groups, int32_t* gs) {
  const size_t panels = (rows + kP - 1) / kP;
  for (size_t p = 0; p < panels; ++p) {
    for (size_t g = 0; g < groups; ++g) {
      for (size_t j = 0; j < kP; ++j) {
        const size_t r = p * kP + j;
        gs[(p * groups + g) * kP + j] = r < rows ? group_sums[r * groups + g] : 0;
      }
    }
  }
}

// Lines of the next weight block to prefetch while a tile computes: the block was unpacked
// into the slab in one burst of loads that nothing overlapped (65% of the block's time went to
// waiting for memory); one line per 4-k step of a tile covers it (a block is kM·K or kM·K/2
// bytes, a tile K/4 steps). Given to the last panel's tile: earlier, the panels after it (xt is
// 1 MB at 512 rows × K 2048) evicted the lines again before the next block's unpack.
struct Prefetch {
  const uint8_t* next = nullptr;
  size_t bytes = 0;

  // Lines [q0, q1) of the block (line q for 4-k step q), those within its bytes (prefetcht0).
  void Lines(size_t q0, size_t q1) const {
    for (size_t q = q0; q < q1 && q * 64 < bytes; ++q) __builtin_prefetch(next + q * 64, 0, 3);
  }
};

// Weight rows per Q4 block walk, both x86 panels: 8 blocks of 6 weight rows unpacked together,
// and per panel of x their 8 tiles run back to back. One block at a time, a whole sweep over x
// (R·K bytes: 1–4 MB at 512 rows, more than L2) passed between two blocks, and a block of 6 rows
// wrote each line of y in 6-column parts a sweep apart, each part fetching the line again; now
// each panel of x is read by 8 tiles in a row (from L2) and its rows of y get 48 columns in one
// go. BM_MatMulQ4DynG32 body 1 (1 thread), R 512: 0.88–0.93× the time; R 128, K 8192: 0.90×;
// R 128, K 2048: 0.97–1.05× (noise). The Q8 tiles (12 rows) read x half as often; the same walk
// measured no difference there.
constexpr size_t kQ4WalkRows = 48;

// The weight rows of a block walk's successor, prefetched in parts by the tiles of the walk's
// last panel: part b is the part_bytes from next + b·part_bytes, clipped to the matrix.
struct NextBlocks {
  const uint8_t* next;
  size_t left;        // bytes of the matrix from next on
  size_t part_bytes;  // one block's

  Prefetch Part(size_t b) const {
    const size_t start = b * part_bytes;
    return start < left ? Prefetch{next + start, std::min(left - start, part_bytes)} : Prefetch{};
  }
};

// y[r, n + m] = out[m·kP + j] for the rows r = kP·p + j < R of panel p (out: the tile's finished
// f32 results); row-major, so each row of y gets kM contiguous stores (a column-major walk with
// stride N hit one cache set).
template <size_t kP, size_t kM>
inline void WriteRows(const float* out, size_t p, size_t R, size_t N, size_t n, float* y) {
  const size_t rows = std::min(kP, R - p * kP);
  for (size_t j = 0; j < rows; ++j) {
    float* yr = y + (p * kP + j) * N + n;
    for (size_t m = 0; m < kM; ++m) yr[m] = out[m * kP + j];
  }
}

// What a Q8 panel block reads and writes.
struct Q8PanelArgs {
  const int8_t* xt;     // the transposed activations
  const int32_t* xsum;  // [panels·kP] Σ_k xq[r, k], zeros past R
  const float* xscale;  // [panels·kP], zeros past R
  const int8_t* w;
  const float* scales;
  const float* bias;
  float* y;
  size_t R, K, N;
  uint8_t* slab;  // [kM, SlabStride(K)]
  float* out;     // [kM, kP]
};

// What a Q4 panel block reads and writes.
struct Q4PanelArgs {
  const int8_t* xt;
  const int32_t* gs;    // [panels, groups, kP] group sums of xq (AVX-512: unless signed + symmetric)
  const float* xscale;  // [panels·kP], zeros past R
  const uint8_t* w;
  const float* scales;
  const float* offsets;
  const float* bias;
  float* y;
  size_t R, K, N, G;
  uint8_t* slab;   // [kM, SlabStride(K)]
  int32_t* qstart; // [kM, groups], the AVX-512 panel's signed form only
  float* out;      // [kM, kP]
};

}  // namespace slm::kernels::vnni
