// Highway body shared by Attention (f32 K/V, attention-inl.h) and AttentionQ8 (int8 K/V with
// per-row scales, attention_q8-inl.h), compiled once per SIMD target in each of their .cc files.
// The two differ only in the row type (kernels/attention_rows.h): int8 rows are widened to f32
// in registers (int8 → int32 → f32) inside Dot / LoadF32, and their row scale is folded into
// the score / probability once per column (KvRows::Scaled), never per element; for f32 rows
// Scaled is the identity, so the f32 kernel does exactly the operations it did on its own.
//
// Per row t the mask row is scanned once into a VisibleColumns index (shared by all heads);
// per head, three walks over the visible columns only: scores (SIMD dot products over
// head_dim, 4 columns at a time), exp / sum (Highway's vector Exp over gathered columns), and
// out = Σ e·v / sum (SIMD, the output vectors held in registers across the walk). Scores live in
// the scratch slots of their own columns. Softmax as torch: subtract the max, exp, normalize by
// the sum — applied once to the weighted sum instead of to every probability.

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

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/attention_rows.h"
#include "kernels/visible_columns.h"

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

// Σ a[i]·float(b[i]) over n elements of an f32 or int8 row b; two accumulators halve the FMA
// dependency chain.
template <class Elem>
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const Elem* HWY_RESTRICT b, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * NL <= n; i += 2 * NL) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), LoadF32(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + NL), LoadF32(d, b + i + NL), s1);
  }
  if (i + NL <= n) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), LoadF32(d, b + i), s0);
    i += NL;
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += a[i] * float(b[i]);
  return sum;
}

// out[j] = q·rows[j] for 4 rows: q is loaded once per vector step for all 4, and the 4 chains
// are independent (a single dot is latency-bound on its FMA chain and its reduction).
template <class Elem>
HWY_INLINE void Dot4(const float* HWY_RESTRICT q, const Elem* const rows[4], size_t n, float out[4]) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + NL <= n; i += NL) {
    const auto qv = hn::LoadU(d, q + i);
    s0 = hn::MulAdd(qv, LoadF32(d, rows[0] + i), s0);
    s1 = hn::MulAdd(qv, LoadF32(d, rows[1] + i), s1);
    s2 = hn::MulAdd(qv, LoadF32(d, rows[2] + i), s2);
    s3 = hn::MulAdd(qv, LoadF32(d, rows[3] + i), s3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(d, s0));
  out[1] = hn::GetLane(hn::SumOfLanes(d, s1));
  out[2] = hn::GetLane(hn::SumOfLanes(d, s2));
  out[3] = hn::GetLane(hn::SumOfLanes(d, s3));
  for (; i < n; ++i) {
    for (size_t j = 0; j < 4; ++j) out[j] += q[i] * float(rows[j][i]);
  }
}

// out[d0, d0 + kV·lanes) = inv_sum · Σ_c e[c]·v_c[d0, ...) over the visible columns, the kV
// output vectors held in registers across the walk (instead of a load and a store of the output
// per column). e[c]: the exp of column c's score, in its scratch slot; for int8 rows the row
// scale is folded into e[c] once per column.
template <size_t kV, class Elem>
HWY_INLINE void WeightedValueBlock(const KvRows<Elem>& values, const VisibleColumns& vis,
                                   const float* HWY_RESTRICT e, int64_t g, float inv_sum,
                                   float* HWY_RESTRICT out, size_t d0) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  hn::Vec<decltype(d)> acc[kV];
  HWY_UNROLL(8)
  for (size_t i = 0; i < kV; ++i) acc[i] = hn::Zero(d);
  for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
    const auto vp = hn::Set(d, values.Scaled(e[c], g, c));
    const Elem* row = values.Row(g, c) + d0;
    HWY_UNROLL(8)
    for (size_t i = 0; i < kV; ++i) acc[i] = hn::MulAdd(vp, LoadF32(d, row + i * NL), acc[i]);
  }
  const auto vinv = hn::Set(d, inv_sum);
  HWY_UNROLL(8)
  for (size_t i = 0; i < kV; ++i) hn::StoreU(hn::Mul(acc[i], vinv), d, out + d0 + i * NL);
}

// out[hd] = inv_sum · Σ_c e[c]·v_c: blocks of 8, 4, 2, 1 vectors (one walk each; head_dim 64
// is one walk on AVX-512 and AVX2), then the last hd % lanes elements in scalar code.
template <class Elem>
HWY_INLINE void WeightedValueSum(const KvRows<Elem>& values, const VisibleColumns& vis,
                                 const float* HWY_RESTRICT e, int64_t g, float inv_sum,
                                 float* HWY_RESTRICT out, size_t hd) {
  const size_t NL = hn::Lanes(hn::ScalableTag<float>());
  size_t d0 = 0;
  while (d0 + NL <= hd) {
    const size_t nv = (hd - d0) / NL;
    if (nv >= 8) {
      WeightedValueBlock<8>(values, vis, e, g, inv_sum, out, d0);
      d0 += 8 * NL;
    } else if (nv >= 4) {
      WeightedValueBlock<4>(values, vis, e, g, inv_sum, out, d0);
      d0 += 4 * NL;
    } else if (nv >= 2) {
      WeightedValueBlock<2>(values, vis, e, g, inv_sum, out, d0);
      d0 += 2 * NL;
    } else {
      WeightedValueBlock<1>(values, vis, e, g, inv_sum, out, d0);
      d0 += NL;
    }
  }
  if (d0 >= hd) return;
  for (size_t i = d0; i < hd; ++i) out[i] = 0.0f;
  for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
    const float p = values.Scaled(e[c], g, c);
    const Elem* row = values.Row(g, c);
    for (size_t i = d0; i < hd; ++i) out[i] += p * float(row[i]);
  }
  for (size_t i = d0; i < hd; ++i) out[i] *= inv_sum;
}

// e[c] = exp(e[c] − max_s) for the visible columns, a vector of them at a time (Highway's Exp,
// at most 1 ulp from std::exp; arguments below −104 give 0, so they are clamped at −200 before
// the float → int step inside Exp); returns Σ e[c], each vector's sum added in double.
HWY_INLINE double ExpAndSum(const VisibleColumns& vis, float* HWY_RESTRICT e, float max_s) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float buf[kMaxLanes];
  int64_t cols[kMaxLanes];
  const auto floor = hn::Set(d, -200.0f);
  double sum = 0.0;
  size_t n = 0;
  const auto flush = [&] {
    for (size_t i = n; i < NL; ++i) buf[i] = -200.0f;
    const auto v = hn::Exp(d, hn::Max(hn::Load(d, buf), floor));
    hn::Store(v, d, buf);
    sum += double(hn::GetLane(hn::SumOfLanes(d, v)));
    for (size_t i = 0; i < n; ++i) e[cols[i]] = buf[i];
    n = 0;
  };
  for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
    cols[n] = c;
    buf[n++] = e[c] - max_s;
    if (n == NL) flush();
  }
  if (n > 0) flush();
  return sum;
}

// Heads [h_begin, h_end) of attention over `keys` / `values` (shapes as kernels.h Attention).
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
  int64_t scores = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* mrow = mask + t * cols;
    const VisibleColumns vis(mrow, scratch, cols);
    for (int64_t h = h_begin; h < h_end; ++h) {
      const int64_t g = h / group;
      const float* qh = q + (t * n_heads + h) * head_dim;
      float* oh = out + (t * n_heads + h) * head_dim;
      if (vis.count() == 0) {
        for (size_t i = 0; i < hd; ++i) oh[i] = 0.0f;
        continue;
      }

      float max_s = -std::numeric_limits<float>::infinity();
      const auto finish = [&](int64_t c, float dot) {
        float s = keys.Scaled(dot, g, c) * scale;
        if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
        s += mrow[c];
        scratch[c] = s;
        max_s = s > max_s ? s : max_s;
      };
      int64_t c = vis.first();
      while (c < vis.end()) {  // 4 visible columns at a time, then one by one
        int64_t cs[4];
        const Elem* rows[4];
        size_t n = 0;
        for (; n < 4 && c < vis.end(); ++n, c = vis.Next(c)) {
          cs[n] = c;
          rows[n] = keys.Row(g, c);
        }
        if (n == 4) {
          float dots[4];
          Dot4(qh, rows, hd, dots);
          for (size_t j = 0; j < 4; ++j) finish(cs[j], dots[j]);
        } else {
          for (size_t j = 0; j < n; ++j) finish(cs[j], Dot(qh, rows[j], hd));
        }
      }
      const double sum = ExpAndSum(vis, scratch, max_s);
      WeightedValueSum(values, vis, scratch, g, float(1.0 / sum), oh, hd);
      scores += vis.count();
    }
  }
  return scores;
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_BODY_INL_H_
