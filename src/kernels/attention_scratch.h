// Where the attention kernels (attention_body-inl.h) keep their per-call working data inside the
// caller's scratch (kernels.h AttentionScratchFloats): offsets in floats, each section starting a
// multiple of 16 floats into the scratch.
//   score rows  one row of L + T columns per head of a batch and row of a tile (in key-block
//               calls the stride is padded by 64 columns, so a whole vector of columns can be
//               stored at the end of a row; row-wise calls keep L + T: the padded stride measured
//               ~5% slower BM_AttentionDecode/2048 on Zen 5);
//   bounds      each tile row's runs of visible columns (VisibleRuns::BoundsFor(L + T) int32);
//   key blocks  only for calls of at least kAttentionKeyBlockRows rows: one kv head's keys
//               transposed in blocks of a vector's lanes of columns (attention_key_blocks-inl.h),
//               their int8 row scales, one "built" flag per block, which blocks each tile row
//               reaches, and each tile row and head's running maximum.
#pragma once

#include <cstdint>

namespace slm::kernels {

// Query heads of one kv group attended together (each key / value row loaded once for them).
constexpr int64_t kAttentionHeadBatch = 4;

// Calls of at least this many rows score from transposed key blocks, this many rows at a time:
// a block (4 KB at head_dim 64 on AVX-512) stays in L1 while every row of the tile and every
// head of the batch use it. Fewer rows score row by row from the cache rows.
constexpr int64_t kAttentionKeyBlockRows = 16;

struct AttentionScratchLayout {
  int64_t row_stride = 0;        // floats per score row; row (r, h) at (r·batch + h)·row_stride
  int64_t bounds = 0;            // offset of the rows' runs: row r's int32 bounds at + r·bounds_stride
  int64_t bounds_stride = 0;
  int64_t key_blocks = 0;        // offset of the transposed keys (key-block calls only)
  int64_t key_scales = 0;        // offset of their int8 row scales
  int64_t key_block_built = 0;   // offset of the int32 per-block "built" flags
  int64_t reach = 0;             // offset of the uint8 [rows + 1][blocks] "row reaches block" flags
  int64_t reach_stride = 0;      // bytes per row of them
  int64_t row_max = 0;           // offset of the running maxima, [rows][batch] vectors of 64 floats
  int64_t total = 0;             // floats in all

  static bool KeyBlockCall(int64_t T) { return T >= kAttentionKeyBlockRows; }

  // Requires n_kv_heads > 0. Sizes hold for any vector width up to 64 lanes (SVE's largest).
  static AttentionScratchLayout For(int64_t L, int64_t T, int64_t n_heads, int64_t n_kv_heads,
                                    int64_t head_dim) {
    constexpr int64_t kMaxLanes = 64, kMinLanes = 4;
    const auto align = [](int64_t floats) { return (floats + 15) / 16 * 16; };
    // A block of NL ≤ 64 columns starting below L + T ends below the padded row.
    const int64_t cols = L + T, padded = (cols + kMaxLanes - 1) / kMaxLanes * kMaxLanes + kMaxLanes;
    const int64_t group = n_heads / n_kv_heads;
    const int64_t batch = group < kAttentionHeadBatch ? group : kAttentionHeadBatch;
    const int64_t rows = KeyBlockCall(T) ? kAttentionKeyBlockRows : 1;
    AttentionScratchLayout s;
    s.row_stride = KeyBlockCall(T) ? padded : cols;
    s.bounds = rows * batch * padded;
    s.bounds_stride = align(cols + 1);
    s.total = s.bounds + rows * s.bounds_stride;
    if (KeyBlockCall(T)) {
      const int64_t max_blocks = padded / kMinLanes;
      s.key_blocks = s.total;
      s.key_scales = s.key_blocks + padded * head_dim;
      s.key_block_built = s.key_scales + padded;
      s.reach = s.key_block_built + align(max_blocks);
      s.reach_stride = max_blocks;
      s.row_max = s.reach + align(((rows + 1) * max_blocks + 3) / 4);
      s.total = s.row_max + rows * batch * kMaxLanes;
    }
    return s;
  }
};

}  // namespace slm::kernels
