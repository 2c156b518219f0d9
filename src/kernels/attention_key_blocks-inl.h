// The score walk of prefill-sized attention calls (T >= kAttentionKeyBlockRows) over keys
// transposed into blocks of a vector's lanes of columns, for attention_body-inl.h.
//
// Why: the row-wise walk (ScoreWalkInRegisters) ends every column's dot product in a lane
// reduction and handles each column's score in 4-lane vectors and scalar stores; with head_dim
// 64 on AVX-512 that was ~6 of the ~11 cycles per (row, head, column) score, against 2 for its
// FMAs (perf, BM_AttentionPrefill, thirty-second session). With a block's keys transposed (lane
// l = column l), one FMA steps NL columns at once, the reduction tree becomes vector adds and the
// scaling, mask and running maximum are vector ops over NL columns. A kv head's blocks are built
// once per call and shared by all its query heads and all T rows, kAttentionKeyBlockRows rows at
// a time: a block is loaded from L1 by every row and head of a tile (walked row by row, the
// blocks streamed from L2 for each row and head pair, 1.5× slower than the row-wise walk).
//
// Same bits as the row-wise walk (and so as one-row decode calls): the row-wise dot product of
// a column is, per lane j of a vector, an FMA chain over the hd / NL steps (q[s·NL + j] ·
// k[s·NL + j], from zero), then SumOfLanes4's tree: (j0 + j2) + (j1 + j3) within each group of
// 4 lanes, the groups added in order. Here chain j is a vector of NL columns and the tree adds
// those vectors in the same order; the scale, soft-cap, mask and maximum are the same per-element
// operations. Fixed-size targets only (on scalable ones SumOfLanes4's interleaves span the whole
// vector), head_dim a multiple of NL, NL a multiple of 4.

#if defined(SLM_KERNELS_ATTENTION_KEY_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ATTENTION_KEY_BLOCKS_INL_H_
#undef SLM_KERNELS_ATTENTION_KEY_BLOCKS_INL_H_
#else
#define SLM_KERNELS_ATTENTION_KEY_BLOCKS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "kernels/attention_rows.h"
#include "kernels/attention_scratch.h"
#include "kernels/visible_runs.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// s · scale, then soft-capped (softcap · tanh(s / softcap)) when softcap > 0: the per-element
// steps of both score walks (the row-wise one's lanes are heads, the key blocks' are columns),
// kept in one place because the two must agree bit for bit.
template <class D>
HWY_INLINE hn::Vec<D> ScaleAndSoftCap(D d, hn::Vec<D> s, hn::Vec<D> vscale, float softcap) {
  s = hn::Mul(s, vscale);
  if (softcap > 0.0f) {
    HWY_ALIGN float capped[HWY_MAX_BYTES / sizeof(float)];
    hn::Store(s, d, capped);
    for (size_t l = 0; l < hn::Lanes(d); ++l) capped[l] = softcap * std::tanh(capped[l] / softcap);
    s = hn::Load(d, capped);
  }
  return s;
}
#endif

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// One kv head's keys as blocks of NL columns, transposed: block k holds columns [k·NL, k·NL + NL),
// element i of column k·NL + l at block(k)[i·NL + l] (int8 rows widened to f32, which is exact),
// the column's row scale (int8 rows) at scales(k)[l]. A block is built the first time a row's
// visible columns reach into it, from all of its columns: the hidden ones are read, scored and
// discarded (their lanes become -inf), so garbage there changes nothing. Zeros past the last.
template <class Elem>
class KeyBlocks {
 public:
  static bool Apply(int64_t T, size_t hd) {
    const size_t NL = hn::Lanes(hn::ScalableTag<float>());
    return AttentionScratchLayout::KeyBlockCall(T) && NL % 4 == 0 && hd % NL == 0;
  }

  KeyBlocks(const KvRows<Elem>& keys, float* scratch, const AttentionScratchLayout& layout,
            int64_t cols, size_t hd)
      : keys_(keys),
        blocks_(scratch + layout.key_blocks),
        scales_(scratch + layout.key_scales),
        built_(reinterpret_cast<int32_t*>(scratch + layout.key_block_built)),
        cols_(cols),
        hd_(hd),
        NL_(int64_t(hn::Lanes(hn::ScalableTag<float>()))) {}

  // Starts over for kv head g.
  void Reset(int64_t g) {
    g_ = g;
    std::fill(built_, built_ + (cols_ + NL_ - 1) / NL_, 0);
  }

  int64_t lanes() const { return NL_; }
  const float* scales(int64_t k) const { return scales_ + k * NL_; }

  const float* block(int64_t k) {
    float* b = blocks_ + k * NL_ * int64_t(hd_);
    if (!built_[k]) {
      Build(k, b);
      built_[k] = 1;
    }
    return b;
  }

 private:
  void Build(int64_t k, float* HWY_RESTRICT b) {
    for (int64_t l = 0; l < NL_; ++l) {
      const int64_t c = k * NL_ + l;
      if (c >= cols_) {
        for (size_t i = 0; i < hd_; ++i) b[int64_t(i) * NL_ + l] = 0.0f;
        scales_[c] = 0.0f;
        continue;
      }
      const Elem* HWY_RESTRICT row = keys_.Row(g_, c);
      for (size_t i = 0; i < hd_; ++i) b[int64_t(i) * NL_ + l] = float(row[i]);
      if constexpr (KvRows<Elem>::kScaled) scales_[c] = keys_.RowScale(g_, c);
    }
  }

  const KvRows<Elem>& keys_;
  float* blocks_;
  float* scales_;
  int32_t* built_;
  int64_t cols_;
  size_t hd_;
  int64_t NL_;
  int64_t g_ = 0;
};

// Query heads per pass of BlockDots: two need 16 accumulators + 4 totals, which fit AVX-512's
// and NEON's 32 registers but not AVX2's 16.
constexpr size_t kBlockDotHeads = (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) ? 1 : 2;

// finish(h, b, dots): lane l of dots = q[h] · column l of block[b], for kH query heads and kB
// blocks, in the row-wise walk's order (file comment).
template <size_t kH, size_t kB, class Finish>
HWY_INLINE void BlockDots(const float* const q[], const float* const block[], size_t hd,
                          Finish&& finish) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V total[kH][kB];
  for (size_t j0 = 0; j0 < NL; j0 += 4) {  // one 4-lane group of the tree at a time
    V a[kH][kB][4];
    HWY_UNROLL(2)
    for (size_t h = 0; h < kH; ++h) {
      HWY_UNROLL(2)
      for (size_t b = 0; b < kB; ++b) {
        HWY_UNROLL(4)
        for (size_t j = 0; j < 4; ++j) a[h][b][j] = hn::Zero(d);
      }
    }
    for (size_t i0 = j0; i0 < hd; i0 += NL) {  // the chains' steps: element i0 + j of lane j
      HWY_UNROLL(4)
      for (size_t j = 0; j < 4; ++j) {
        V k[kB];
        HWY_UNROLL(2)
        for (size_t b = 0; b < kB; ++b) {
          k[b] = hn::LoadU(d, block[b] + (i0 + j) * NL);
#if HWY_ARCH_X86
          // One load per key vector for all kH heads: GCC otherwise folds the load into each
          // head's FMA, and the loads, not the FMAs, set the pace.
          __asm__("" : "+v"(k[b].raw));
#endif
        }
        HWY_UNROLL(2)
        for (size_t h = 0; h < kH; ++h) {
          const V qb = hn::Set(d, q[h][i0 + j]);
          HWY_UNROLL(2)
          for (size_t b = 0; b < kB; ++b) a[h][b][j] = hn::MulAdd(qb, k[b], a[h][b][j]);
        }
      }
    }
    HWY_UNROLL(2)
    for (size_t h = 0; h < kH; ++h) {
      HWY_UNROLL(2)
      for (size_t b = 0; b < kB; ++b) {
        const V group = hn::Add(hn::Add(a[h][b][0], a[h][b][2]), hn::Add(a[h][b][1], a[h][b][3]));
        total[h][b] = j0 == 0 ? group : hn::Add(total[h][b], group);
      }
    }
  }
  HWY_UNROLL(2)
  for (size_t h = 0; h < kH; ++h) {
    HWY_UNROLL(2)
    for (size_t b = 0; b < kB; ++b) finish(h, b, total[h][b]);
  }
}

// Scores of kH heads for the n rows of a tile, block by block: for row r and head h (query
// vector q[r·kH + h], score row e[r·kH + h], mask row mrow[r]) e[c] = s for every column c of the
// blocks the row reaches (-inf where it hides c), and the running maximum in row_max[(r·kH +
// h)·64 ..] (a vector; initialised by the caller). reach[r·reach_stride + k]: row r reaches block
// k; row n of reach: any row does. s as the row-wise walk's finish: dot · (row scale) · scale,
// soft-capped, + mask.
template <size_t kH, class Elem>
HWY_INLINE void ScoreTileKeyBlocks(KeyBlocks<Elem>& blocks, size_t n, const float* const q[],
                                   float* const e[], const float* const mrow[], const uint8_t* reach,
                                   int64_t reach_stride, int64_t cols, size_t hd, float scale,
                                   float softcap, float* row_max) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t NL = blocks.lanes();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const V neg_inf = hn::Set(d, kNegInf), vscale = hn::Set(d, scale);
  const auto finish = [&](size_t r, size_t h, int64_t k, V s) {
    const int64_t c0 = k * NL;
    if constexpr (KvRows<Elem>::kScaled) s = hn::Mul(s, hn::LoadU(d, blocks.scales(k)));
    s = ScaleAndSoftCap(d, s, vscale, softcap);
    V m;
    if (c0 + NL <= cols) {
      m = hn::LoadU(d, mrow[r] + c0);
    } else {  // the last block: columns past the row's end are hidden
      HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)];
      for (int64_t l = 0; l < NL; ++l) tail[l] = c0 + l < cols ? mrow[r][c0 + l] : kNegInf;
      m = hn::Load(d, tail);
    }
    s = hn::IfThenElse(hn::Eq(m, neg_inf), neg_inf, hn::Add(s, m));
    float* mx = row_max + (r * kH + h) * 64;
    hn::StoreU(hn::Max(hn::LoadU(d, mx), s), d, mx);
    hn::StoreU(s, d, e[r * kH + h] + c0);
  };
  // The kH heads of row r against blocks k[0..nb) (nb = 1 or 2), in passes of kBlockDotHeads.
  const auto score_row = [&](size_t r, const int64_t* k, size_t nb) {
    const float* kb[2] = {blocks.block(k[0]), nb == 2 ? blocks.block(k[1]) : nullptr};
    const auto pass = [&](auto heads_tag, size_t h0) {
      constexpr size_t kPassHeads = decltype(heads_tag)::value;
      const auto fin = [&](size_t h, size_t b, V s) { finish(r, h0 + h, k[b], s); };
      if (nb == 2) {
        BlockDots<kPassHeads, 2>(q + r * kH + h0, kb, hd, fin);
      } else {
        BlockDots<kPassHeads, 1>(q + r * kH + h0, kb, hd, fin);
      }
    };
    size_t h0 = 0;
    if constexpr (kBlockDotHeads == 2) {
      for (; h0 + 2 <= kH; h0 += 2) pass(std::integral_constant<size_t, 2>{}, h0);
    }
    for (; h0 < kH; ++h0) pass(std::integral_constant<size_t, 1>{}, h0);
  };
  // Blocks any row reaches, two at a time; each row scores those of the two it reaches.
  const uint8_t* any = reach + n * size_t(reach_stride);
  const int64_t n_blocks = (cols + NL - 1) / NL;
  int64_t pair[2];
  size_t in_pair = 0;
  const auto flush = [&] {
    for (size_t r = 0; r < n; ++r) {
      const uint8_t* row_reach = reach + r * size_t(reach_stride);
      int64_t k[2];
      size_t nb = 0;
      for (size_t i = 0; i < in_pair; ++i) {
        if (row_reach[pair[i]]) k[nb++] = pair[i];
      }
      if (nb > 0) score_row(r, k, nb);
    }
    in_pair = 0;
  };
  for (int64_t k = 0; k < n_blocks; ++k) {
    if (!any[k]) continue;
    pair[in_pair++] = k;
    if (in_pair == 2) flush();
  }
  if (in_pair > 0) flush();
}

#endif  // HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_KEY_BLOCKS_INL_H_
