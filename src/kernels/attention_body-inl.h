// Highway body shared by Attention (f32 K/V, attention-inl.h) and AttentionQ8 (int8 K/V with
// per-row scales, attention_q8-inl.h), compiled once per SIMD target in each of their .cc files.
// The two differ only in the row type (kernels/attention_rows.h): int8 rows are widened to f32
// in registers (int8 → int32 → f32) inside LoadF32, and their row scale is folded into the
// score / probability once per column (KvRows::Scaled), never per element; for f32 rows Scaled
// is the identity, so the f32 kernel does exactly the operations it did on its own.
//
// Per row t the mask row is scanned once into runs of visible columns (visible_runs.h, shared by
// all heads). The query heads of one kv group are attended together (up to kAttentionHeadBatch),
// in three walks over the visible columns only: scores (each key row loaded once, one FMA chain per
// head, the lane reductions of the heads sharing one tree; f32 query rows held in registers
// where they fit), exp / sum per head (Highway's vector Exp, a vector of visible columns at a
// time: in place where they are contiguous, else gathered), and out = Σ e·v / sum (each value
// row loaded once, the heads' output vectors held in registers across the walk). Head i of a batch keeps its scores
// in scratch row i, in the slots of their own columns. Softmax as torch: subtract the max, exp,
// normalize by the sum — applied once to the weighted sum instead of to every probability.
// A head's operations do not depend on which heads it is batched with, nor on T: chunked
// prefill and one-token decode give the same bits. Calls of kAttentionKeyBlockRows rows or more
// compute the same scores from keys transposed into blocks of a vector's lanes of columns
// (attention_key_blocks-inl.h), kv head by kv head and a tile of rows at a time.

#if defined(SLM_KERNELS_ATTENTION_BODY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ATTENTION_BODY_INL_H_
#undef SLM_KERNELS_ATTENTION_BODY_INL_H_
#else
#define SLM_KERNELS_ATTENTION_BODY_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/attention_key_blocks-inl.h"
#include "kernels/attention_rows.h"
#include "kernels/attention_scratch.h"
#include "kernels/kernels.h"
#include "kernels/lane_sums-inl.h"
#include "kernels/vec_tile-inl.h"
#include "kernels/visible_runs.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// n elements of a row as f32 vectors: f32 loads as is, int8 widened (int8 → int32 → f32).
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const int8_t* HWY_RESTRICT p) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<int8_t, D> d8;
  return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

// For kH heads of one kv group: out_h[d0, d0 + kV·lanes) = inv_sum[h] · Σ_c e_h[c]·v_c[d0, ...)
// over the visible columns, the kH·kV output vectors held in registers across the walk (no load
// and store of the outputs per column) and each value row loaded once for the kH heads. e_h[c]:
// the exp of head h's score of column c, in its scratch slot; for int8 rows the row scale is
// folded into e_h[c] once per column. Each output element is one FMA chain over the columns in
// walk order, whatever kH and kV: results do not depend on how heads are batched.
template <size_t kH, size_t kV, class Elem>
HWY_INLINE void WeightedValueBlock(const KvRows<Elem>& values, const VisibleRuns& vis,
                                   float* const e[], int64_t g, const float inv_sum[],
                                   float* const out[], size_t d0) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  SLM_VEC_TILE2(V, acc, kH, kV);
  HWY_UNROLL(4)
  for (size_t h = 0; h < kH; ++h) {
    HWY_UNROLL(8)
    for (size_t i = 0; i < kV; ++i) acc[h][i] = hn::Zero(d);
  }
  for (int64_t r = 0; r < vis.runs(); ++r) {
    for (int64_t c = vis.begin(r), end = vis.end(r); c < end;) {
      // The run's columns in the cache, then in this call's rows: a pointer stepped per column.
      const int64_t seg_end = values.SegmentEnd(c, end), stride = values.RowStride(c);
      for (const Elem* row = values.Row(g, c) + d0; c < seg_end; ++c, row += stride) {
        SLM_VEC_TILE(V, v, kV);
        HWY_UNROLL(8)
        for (size_t i = 0; i < kV; ++i) v[i] = LoadF32(d, row + i * NL);
        HWY_UNROLL(4)
        for (size_t h = 0; h < kH; ++h) {
          const auto vp = hn::Set(d, values.Scaled(e[h][c], g, c));
          HWY_UNROLL(8)
          for (size_t i = 0; i < kV; ++i) acc[h][i] = hn::MulAdd(vp, v[i], acc[h][i]);
        }
      }
    }
  }
  HWY_UNROLL(4)
  for (size_t h = 0; h < kH; ++h) {
    const auto vinv = hn::Set(d, inv_sum[h]);
    HWY_UNROLL(8)
    for (size_t i = 0; i < kV; ++i) hn::StoreU(hn::Mul(acc[h][i], vinv), d, out[h] + d0 + i * NL);
  }
}

// out_h[hd] = inv_sum[h] · Σ_c e_h[c]·v_c for kH heads: blocks of at most 16 accumulators (8, 4,
// 2 or 1 vectors per head; head_dim 64 is one walk on AVX-512 for 4 heads), then the last
// hd % lanes elements in scalar code.
template <size_t kH, class Elem>
HWY_INLINE void WeightedValueSum(const KvRows<Elem>& values, const VisibleRuns& vis,
                                 float* const e[], int64_t g, const float inv_sum[],
                                 float* const out[], size_t hd) {
  const size_t NL = hn::Lanes(hn::ScalableTag<float>());
  constexpr size_t kMaxV = 16 / kH;  // 16, 8, 5 or 4 vectors per head
  size_t d0 = 0;
  while (d0 + NL <= hd) {
    const size_t nv = (hd - d0) / NL;
    if (nv >= 8 && kMaxV >= 8) {
      WeightedValueBlock<kH, (kMaxV >= 8 ? 8 : 1)>(values, vis, e, g, inv_sum, out, d0);
      d0 += (kMaxV >= 8 ? 8 : 1) * NL;
    } else if (nv >= 4) {
      WeightedValueBlock<kH, 4>(values, vis, e, g, inv_sum, out, d0);
      d0 += 4 * NL;
    } else if (nv >= 2) {
      WeightedValueBlock<kH, 2>(values, vis, e, g, inv_sum, out, d0);
      d0 += 2 * NL;
    } else {
      WeightedValueBlock<kH, 1>(values, vis, e, g, inv_sum, out, d0);
      d0 += NL;
    }
  }
  if (d0 >= hd) return;
  for (size_t h = 0; h < kH; ++h) {
    for (size_t i = d0; i < hd; ++i) out[h][i] = 0.0f;
  }
  for (int64_t r = 0; r < vis.runs(); ++r) {
    for (int64_t c = vis.begin(r); c < vis.end(r); ++c) {
      const Elem* row = values.Row(g, c);
      for (size_t h = 0; h < kH; ++h) {
        const float p = values.Scaled(e[h][c], g, c);
        for (size_t i = d0; i < hd; ++i) out[h][i] += p * float(row[i]);
      }
    }
  }
  for (size_t h = 0; h < kH; ++h) {
    for (size_t i = d0; i < hd; ++i) out[h][i] *= inv_sum[h];
  }
}

// e[c] = exp(e[c] − max_s) for the visible columns, a vector of them at a time (Highway's Exp,
// at most 1 ulp from std::exp; arguments below −104 give 0, so they are clamped at −200 before
// the float → int step inside Exp); returns Σ e[c], each vector's sum added in double. The
// vectors are the visible columns in walk order, NL at a time; NL columns inside one run are
// loaded and stored in place, others gathered — the same vectors either way, so the same bits.
HWY_INLINE double ExpAndSum(const VisibleRuns& vis, float* HWY_RESTRICT e, float max_s) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float buf[kMaxLanes];
  int64_t cols[kMaxLanes];
  const auto floor = hn::Set(d, -200.0f);
  const auto vmax = hn::Set(d, max_s);
  double sum = 0.0;
  size_t n = 0;
  // Returns the gathered vector's sum rather than adding it to `sum` itself: captured by
  // reference, `sum` lived on the stack, a store and reload per vector of columns.
  const auto flush = [&]() -> double {
    for (size_t i = n; i < NL; ++i) buf[i] = -200.0f;
    const auto v = hn::Exp(d, hn::Max(hn::Load(d, buf), floor));
    hn::Store(v, d, buf);
    for (size_t i = 0; i < n; ++i) e[cols[i]] = buf[i];
    n = 0;
    return double(hn::GetLane(hn::SumOfLanes(d, v)));
  };
  for (int64_t r = 0; r < vis.runs(); ++r) {
    const int64_t end = vis.end(r);
    for (int64_t c = vis.begin(r); c < end;) {
      if (n == 0 && c + int64_t(NL) <= end) {
        const auto v = hn::Exp(d, hn::Max(hn::Sub(hn::LoadU(d, e + c), vmax), floor));
        hn::StoreU(v, d, e + c);
        sum += double(hn::GetLane(hn::SumOfLanes(d, v)));
        c += int64_t(NL);
        continue;
      }
      cols[n] = c;
      buf[n++] = e[c] - max_s;
      if (n == NL) sum += flush();
      ++c;
    }
  }
  if (n > 0) sum += flush();
  return sum;
}

// dots[h] = q_h · row for kH query vectors against one key row, the row loaded once per vector
// step for all of them: per head one FMA chain over the full vectors, reduced across lanes (one
// shared tree, SumOfLanes4, with zero vectors for absent heads), then the hd % lanes tail in
// scalar code — the same operations for a head whatever kH is.
template <size_t kH, class Elem>
HWY_INLINE void DotHeads(const float* const q[], const Elem* HWY_RESTRICT row, size_t n, float dots[]) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  SLM_VEC_TILE(V, s, 4);
  HWY_UNROLL(4)
  for (size_t h = 0; h < 4; ++h) s[h] = hn::Zero(d);
  size_t i = 0;
  for (; i + NL <= n; i += NL) {
    const auto k = LoadF32(d, row + i);
    HWY_UNROLL(4)
    for (size_t h = 0; h < kH; ++h) s[h] = hn::MulAdd(hn::LoadU(d, q[h] + i), k, s[h]);
  }
  float sums[4];
  SumOfLanes4(d, s, sums);
  for (size_t h = 0; h < kH; ++h) dots[h] = sums[h];
  for (; i < n; ++i) {
    for (size_t h = 0; h < kH; ++h) dots[h] += q[h][i] * float(row[i]);
  }
}

// The score walk of DotHeads with the kH query rows held in registers (head_dim = kQV lanes-wide
// vectors exactly, kH·kQV ≤ 16): the same FMA chains and reduction, without reloading q for
// every column. finish(c, dots) takes each column's kH dot products.
template <size_t kH, size_t kQV, class Elem, class Finish>
HWY_INLINE void ScoreWalkInRegisters(const float* const q[], const KvRows<Elem>& keys,
                                     const VisibleRuns& vis, int64_t g, Finish&& finish) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  SLM_VEC_TILE2(V, qv, kH, kQV);
  HWY_UNROLL(4)
  for (size_t h = 0; h < kH; ++h) {
    HWY_UNROLL(8)
    for (size_t i = 0; i < kQV; ++i) qv[h][i] = hn::LoadU(d, q[h] + i * NL);
  }
  for (int64_t r = 0; r < vis.runs(); ++r) {
    for (int64_t c = vis.begin(r), end = vis.end(r); c < end; ++c) {
      const Elem* row = keys.Row(g, c);
      SLM_VEC_TILE(V, s, 4);
      HWY_UNROLL(4)
      for (size_t h = 0; h < 4; ++h) s[h] = hn::Zero(d);
      HWY_UNROLL(8)
      for (size_t i = 0; i < kQV; ++i) {
        const auto k = LoadF32(d, row + i * NL);
        HWY_UNROLL(4)
        for (size_t h = 0; h < kH; ++h) s[h] = hn::MulAdd(qv[h][i], k, s[h]);
      }
      float dots[4];
      SumOfLanes4(d, s, dots);
      finish(c, dots);
    }
  }
}

// Scores of kH heads [h0, h0 + kH) of kv group g for one query row, column by column from the
// key rows: e[h][c] for the visible columns c, max_s[h] the largest.
template <size_t kH, class Elem>
HWY_INLINE void ScoreWalkRows(const float* const q[], const KvRows<Elem>& keys, const VisibleRuns& vis,
                              const float* mrow, float* const e[], int64_t g, size_t hd, float scale,
                              float softcap, float max_s[]) {
#if HWY_TARGET == HWY_SCALAR
  for (size_t h = 0; h < kH; ++h) max_s[h] = -std::numeric_limits<float>::infinity();
  const auto finish = [&](int64_t c, const float* dots) {
    for (size_t h = 0; h < kH; ++h) {
      float s = keys.Scaled(dots[h], g, c) * scale;
      if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
      s += mrow[c];
      e[h][c] = s;
      max_s[h] = s > max_s[h] ? s : max_s[h];
    }
  };
#else
  // Each column's score of every head, s = dot · (key scale) · scale (+ soft-capping) + mask, as
  // one 4-lane vector (lane h: head h, the same operations per lane whatever kH is), the running
  // maxima too: per head and column in scalar code these were most of the score walk's
  // instructions after the dot products.
  const hn::Full128<float> d4;
  const auto vscale = hn::Set(d4, scale);
  auto vmax = hn::Set(d4, -std::numeric_limits<float>::infinity());
  const auto finish = [&](int64_t c, const float* dots) {
    auto s = hn::LoadU(d4, dots);  // dots[0..4): lanes past kH are never stored
    if constexpr (KvRows<Elem>::kScaled) s = hn::Mul(s, hn::Set(d4, keys.RowScale(g, c)));
    s = ScaleAndSoftCap(d4, s, vscale, softcap);
    s = hn::Add(s, hn::Set(d4, mrow[c]));
    vmax = hn::Max(vmax, s);
    HWY_UNROLL(4)
    for (size_t h = 0; h < kH; ++h) e[h][c] = hn::ExtractLane(s, h);
  };
#endif
  // f32 keys only: with int8 keys (widened in registers per column) it measured 6–12% slower.
  const size_t NL = hn::Lanes(hn::ScalableTag<float>());
  const size_t qv = std::is_same_v<Elem, float> && hd % NL == 0 ? hd / NL : 0;  // q vectors per head
  if (qv == 1) {
    ScoreWalkInRegisters<kH, 1>(q, keys, vis, g, finish);
  } else if (qv == 2) {
    ScoreWalkInRegisters<kH, 2>(q, keys, vis, g, finish);
  } else if (qv == 4) {  // kH ≤ 4: at most 16 query vectors
    ScoreWalkInRegisters<kH, 4>(q, keys, vis, g, finish);
  } else if (qv == 8 && kH <= 2) {  // (the 1 only keeps kH > 2 from instantiating 8)
    ScoreWalkInRegisters<kH, (kH <= 2 ? 8 : 1)>(q, keys, vis, g, finish);
  } else {
    for (int64_t r = 0; r < vis.runs(); ++r) {
      for (int64_t c = vis.begin(r); c < vis.end(r); ++c) {
        float dots[4] = {};
        DotHeads<kH>(q, keys.Row(g, c), hd, dots);
        finish(c, dots);
      }
    }
  }
#if HWY_TARGET != HWY_SCALAR
  for (size_t h = 0; h < kH; ++h) max_s[h] = hn::ExtractLane(vmax, h);
#endif
}

// Softmax of kH heads' scores (e[h], visible columns) and their weighted values into out[h].
template <size_t kH, class Elem>
HWY_INLINE void SoftmaxValues(const KvRows<Elem>& values, const VisibleRuns& vis, float* const e[],
                              float* const out[], int64_t g, size_t hd, const float max_s[]) {
  float inv_sum[kH];
  for (size_t h = 0; h < kH; ++h) inv_sum[h] = float(1.0 / ExpAndSum(vis, e[h], max_s[h]));
  WeightedValueSum<kH>(values, vis, e, g, inv_sum, out, hd);
}

// The runs of visible columns of mask row [n] (visible_runs.h), a vector of the row at a time:
// a vector inside a run or inside a gap is skipped whole, one holding a boundary goes through the
// scalar steps. bounds: [VisibleRuns::BoundsFor(n)].
HWY_INLINE VisibleRuns FindVisibleRunsVector(const float* HWY_RESTRICT mask, int64_t n, int32_t* bounds) {
  const hn::ScalableTag<float> d;
  const int64_t NL = int64_t(hn::Lanes(d));
  const auto hidden = hn::Set(d, -std::numeric_limits<float>::infinity());
  VisibleRunsBuilder runs(bounds);
  int64_t j = 0;
  for (; j + NL <= n; j += NL) {
    const auto h = hn::Eq(hn::LoadU(d, mask + j), hidden);
    if (runs.in_run() ? hn::AllFalse(d, h) : hn::AllTrue(d, h)) continue;
    for (int64_t i = j; i < j + NL; ++i) runs.Add(i, IsHiddenColumn(mask[i]));
  }
  for (; j < n; ++j) runs.Add(j, IsHiddenColumn(mask[j]));
  return runs.Finish(n);
}

// kH heads of kv group g for one query row: scores row by row, softmax, weighted values into
// out[h].
template <size_t kH, class Elem>
HWY_INLINE void AttendHeads(const float* const q[], const KvRows<Elem>& keys, const KvRows<Elem>& values,
                            const VisibleRuns& vis, const float* mrow, float* const e[], float* const out[],
                            int64_t g, size_t hd, float scale, float softcap) {
  float max_s[kH];
  ScoreWalkRows<kH>(q, keys, vis, mrow, e, g, hd, scale, softcap, max_s);
  SoftmaxValues<kH>(values, vis, e, out, g, hd, max_s);
}

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// SoftmaxValues as a function of its own for AttendRowTile: inlined there, GCC kept loop
// invariants of the tile code in registers across the p·v walk and spilled two of its four
// value vectors to the stack per column (a store-forwarding round trip for 8 of 16 FMAs).
template <size_t kH, class Elem>
HWY_NOINLINE void SoftmaxValuesOutOfLine(const KvRows<Elem>& values, const VisibleRuns& vis,
                                         float* const e[], float* const out[], int64_t g, size_t hd,
                                         const float max_s[]) {
  SoftmaxValues<kH>(values, vis, e, out, g, hd, max_s);
}

// kH heads [h0, h0 + kH) of kv group g for rows [t0, t1) (at most kAttentionKeyBlockRows):
// scores from the key blocks (ScoreTileKeyBlocks), then per row softmax and weighted values.
// Returns the number of (row, head, column) scores of visible columns. Out of line, so that the
// row-wise walk inlined in AttentionBody (decode) keeps the registers it had on its own.
template <size_t kH, class Elem>
HWY_NOINLINE int64_t AttendRowTile(const float* q, KeyBlocks<Elem>& blocks, const KvRows<Elem>& values,
                                   const float* mask, float* out, float* scratch,
                                   const AttentionScratchLayout& layout, int64_t t0, int64_t t1,
                                   int64_t h0, int64_t g, int64_t n_heads, size_t hd, int64_t cols,
                                   float scale, float softcap) {
  constexpr size_t kRows = size_t(kAttentionKeyBlockRows);
  const size_t n = size_t(t1 - t0);
  const int64_t NL = blocks.lanes(), n_blocks = (cols + NL - 1) / NL;
  uint8_t* reach = reinterpret_cast<uint8_t*>(scratch + layout.reach);
  uint8_t* any = reach + n * size_t(layout.reach_stride);
  std::fill(any, any + n_blocks, uint8_t{0});
  const hn::ScalableTag<float> d;
  float* row_max = scratch + layout.row_max;  // (std::fill of 64 floats per head: a scalar loop)
  for (size_t i = 0; i < n * kH; ++i) {
    hn::StoreU(hn::Set(d, -std::numeric_limits<float>::infinity()), d, row_max + i * 64);
  }
  int64_t runs[kRows], counts[kRows];
  const float* mrows[kRows];
  const float* qs[kRows * kH];
  float* es[kRows * kH];
  for (size_t r = 0; r < n; ++r) {
    const int64_t t = t0 + int64_t(r);
    mrows[r] = mask + t * cols;
    int32_t* bounds = reinterpret_cast<int32_t*>(scratch + layout.bounds) + r * size_t(layout.bounds_stride);
    const VisibleRuns vis = FindVisibleRunsVector(mrows[r], cols, bounds);
    runs[r] = vis.runs();
    counts[r] = vis.count();
    uint8_t* row_reach = reach + r * size_t(layout.reach_stride);
    std::fill(row_reach, row_reach + n_blocks, uint8_t{0});
    for (int64_t i = 0; i < vis.runs(); ++i) {
      for (int64_t k = vis.begin(i) / NL; k <= (vis.end(i) - 1) / NL; ++k) row_reach[k] = any[k] = 1;
    }
    for (size_t h = 0; h < kH; ++h) {
      qs[r * kH + h] = q + (t * n_heads + h0 + int64_t(h)) * int64_t(hd);
      es[r * kH + h] = scratch + int64_t(r * kH + h) * layout.row_stride;
    }
  }
  ScoreTileKeyBlocks<kH>(blocks, n, qs, es, mrows, reach, layout.reach_stride, cols, hd, scale, softcap,
                         row_max);
  int64_t scores = 0;
  for (size_t r = 0; r < n; ++r) {
    const int64_t t = t0 + int64_t(r);
    float* outs[kH];
    for (size_t h = 0; h < kH; ++h) outs[h] = out + (t * n_heads + h0 + int64_t(h)) * int64_t(hd);
    if (counts[r] == 0) {
      for (size_t h = 0; h < kH; ++h) std::fill(outs[h], outs[h] + hd, 0.0f);
      continue;
    }
    const int32_t* bounds = reinterpret_cast<const int32_t*>(scratch + layout.bounds) + r * size_t(layout.bounds_stride);
    const VisibleRuns vis(bounds, runs[r], counts[r]);
    float max_s[kH];
    for (size_t h = 0; h < kH; ++h) {
      max_s[h] = hn::GetLane(hn::MaxOfLanes(d, hn::LoadU(d, row_max + (r * kH + h) * 64)));
    }
    SoftmaxValuesOutOfLine<kH>(values, vis, es + r * kH, outs, g, hd, max_s);
    scores += int64_t(kH) * counts[r];
  }
  return scores;
}
#endif  // HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE

// Heads [h_begin, h_end) of attention over `keys` / `values` (shapes as kernels.h Attention).
// The heads of one kv group are attended together, up to kAttentionHeadBatch at a time, so each
// key and value row is loaded once for all of them; head i of a batch keeps its scores in
// scratch row i (attention_scratch.h). Calls of kAttentionKeyBlockRows rows or more (where the
// target allows) walk kv head by kv head, scoring from that head's keys transposed once for all
// its query heads and rows, a tile of rows at a time (attention_key_blocks-inl.h); others walk
// row by row. Every head's arithmetic is the same whatever the batch and the walk, so results do
// not depend on the head split or on T.
// Returns the number of (row, head, column) scores computed, for the test counters.
template <class Elem>
HWY_INLINE int64_t AttentionBody(const float* q, const KvRows<Elem>& keys,
                                 const KvRows<Elem>& values, const float* mask, float* out,
                                 float* scratch, int64_t T, int64_t L, int64_t n_heads,
                                 int64_t n_kv_heads, int64_t head_dim, float scale, float softcap,
                                 int64_t h_begin, int64_t h_end) {
  const int64_t cols = L + T;
  const int64_t group = n_heads / n_kv_heads;
  const size_t hd = size_t(head_dim);
  const AttentionScratchLayout layout = AttentionScratchLayout::For(L, T, n_heads, n_kv_heads, head_dim);
  int32_t* bounds = reinterpret_cast<int32_t*>(scratch + layout.bounds);
  int64_t scores = 0;
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
  if (KeyBlocks<Elem>::Apply(T, hd)) {
    KeyBlocks<Elem> blocks(keys, scratch, layout, cols, hd);
    for (int64_t g = h_begin / group; g * group < h_end; ++g) {
      blocks.Reset(g);
      const int64_t g_end = std::min(h_end, (g + 1) * group);
      for (int64_t h0 = std::max(h_begin, g * group); h0 < g_end; h0 += kAttentionHeadBatch) {
        const int64_t h1 = std::min(g_end, h0 + kAttentionHeadBatch);
        for (int64_t t0 = 0; t0 < T; t0 += kAttentionKeyBlockRows) {
          const int64_t t1 = std::min(T, t0 + kAttentionKeyBlockRows);
          switch (h1 - h0) {
#define SLM_ATTEND_TILE(kH) \
  AttendRowTile<kH>(q, blocks, values, mask, out, scratch, layout, t0, t1, h0, g, n_heads, hd, cols, scale, softcap)
            case 1: scores += SLM_ATTEND_TILE(1); break;
            case 2: scores += SLM_ATTEND_TILE(2); break;
            case 3: scores += SLM_ATTEND_TILE(3); break;
            default: scores += SLM_ATTEND_TILE(4); break;
#undef SLM_ATTEND_TILE
          }
        }
      }
    }
    return scores;
  }
#endif
  for (int64_t t = 0; t < T; ++t) {
    const float* mrow = mask + t * cols;
    const VisibleRuns vis = FindVisibleRunsVector(mrow, cols, bounds);
    for (int64_t h0 = h_begin; h0 < h_end;) {
      const int64_t g = h0 / group;
      const int64_t h1 = std::min({h_end, (g + 1) * group, h0 + kAttentionHeadBatch});
      const float* qs[kAttentionHeadBatch] = {};
      float* es[kAttentionHeadBatch] = {};
      float* outs[kAttentionHeadBatch] = {};
      for (int64_t h = h0; h < h1; ++h) {
        qs[h - h0] = q + (t * n_heads + h) * head_dim;
        es[h - h0] = scratch + (h - h0) * layout.row_stride;
        outs[h - h0] = out + (t * n_heads + h) * head_dim;
      }
      if (vis.count() == 0) {
        for (int64_t h = h0; h < h1; ++h) std::fill(outs[h - h0], outs[h - h0] + hd, 0.0f);
      } else {
        switch (h1 - h0) {
          case 1: AttendHeads<1>(qs, keys, values, vis, mrow, es, outs, g, hd, scale, softcap); break;
          case 2: AttendHeads<2>(qs, keys, values, vis, mrow, es, outs, g, hd, scale, softcap); break;
          case 3: AttendHeads<3>(qs, keys, values, vis, mrow, es, outs, g, hd, scale, softcap); break;
          default: AttendHeads<4>(qs, keys, values, vis, mrow, es, outs, g, hd, scale, softcap); break;
        }
        scores += (h1 - h0) * vis.count();
      }
      h0 = h1;
    }
  }
  return scores;
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_BODY_INL_H_
