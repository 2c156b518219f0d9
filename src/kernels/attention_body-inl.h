// Highway body shared by Attention (f32 K/V, attention-inl.h) and AttentionQ8 (int8 K/V with
// per-row scales, attention_q8-inl.h), compiled once per SIMD target in each of their .cc files.
// The two differ only in the row type (kernels/attention_rows.h): int8 rows are widened to f32
// in registers (int8 → int32 → f32) inside Dot / MulAddTo, and their row scale is folded into
// the score / probability once per column (KvRows::Scaled), never per element; for f32 rows
// Scaled is the identity, so the f32 kernel does exactly the operations it did on its own.
//
// Per row t the mask row is scanned once into a VisibleColumns index (shared by all heads);
// per head, three walks over the visible columns only: scores (SIMD dot products over
// head_dim), exp / sum (scalar: one exp per column is cheap next to a head_dim-long dot), and
// out += p·v (SIMD). Scores live in the scratch slots of their own columns. Softmax follows
// torch: subtract the max, exp, divide by the sum, then multiply the probabilities with v.

#if defined(SLM_KERNELS_ATTENTION_BODY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ATTENTION_BODY_INL_H_
#undef SLM_KERNELS_ATTENTION_BODY_INL_H_
#else
#define SLM_KERNELS_ATTENTION_BODY_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "kernels/attention_rows.h"
#include "kernels/visible_columns.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// a·b over n floats; two accumulators halve the FMA dependency chain.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * NL <= n; i += 2 * NL) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + NL), hn::LoadU(d, b + i + NL), s1);
  }
  if (i + NL <= n) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    i += NL;
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Σ a[i]·float(b[i]) over n int8 b, the same two-accumulator scheme.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const int8_t* HWY_RESTRICT b, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  auto s0 = hn::Zero(df), s1 = hn::Zero(df);
  size_t i = 0;
  for (; i + 2 * NL <= n; i += 2 * NL) {
    s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, b + i))), s0);
    s1 = hn::MulAdd(hn::LoadU(df, a + i + NL), hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, b + i + NL))), s1);
  }
  if (i + NL <= n) {
    s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, b + i))), s0);
    i += NL;
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += a[i] * float(b[i]);
  return sum;
}

// out[i] += p * v[i] for i < n.
HWY_INLINE void MulAddTo(float p, const float* HWY_RESTRICT v, float* HWY_RESTRICT out,
                         size_t n) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  const auto vp = hn::Set(d, p);
  size_t i = 0;
  for (; i + NL <= n; i += NL) {
    hn::StoreU(hn::MulAdd(vp, hn::LoadU(d, v + i), hn::LoadU(d, out + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] += p * v[i];
}

// out[i] += p * float(v[i]) for i < n int8 v (p already carries the row's scale).
HWY_INLINE void MulAddTo(float p, const int8_t* HWY_RESTRICT v, float* HWY_RESTRICT out,
                         size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  const auto vp = hn::Set(df, p);
  size_t i = 0;
  for (; i + NL <= n; i += NL) {
    const auto vv = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, v + i)));
    hn::StoreU(hn::MulAdd(vp, vv, hn::LoadU(df, out + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] += p * float(v[i]);
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
      for (size_t i = 0; i < hd; ++i) oh[i] = 0.0f;
      if (vis.count() == 0) continue;

      float max_s = -std::numeric_limits<float>::infinity();
      for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
        float s = keys.Scaled(Dot(qh, keys.Row(g, c), hd), g, c) * scale;
        if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
        s += mrow[c];
        scratch[c] = s;
        max_s = s > max_s ? s : max_s;
      }
      double sum = 0.0;  // exact enough that the order of columns does not matter
      for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
        scratch[c] = std::exp(scratch[c] - max_s);
        sum += scratch[c];
      }
      for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
        const float p = values.Scaled(float(scratch[c] / sum), g, c);
        MulAddTo(p, values.Row(g, c), oh, hd);
      }
      scores += vis.count();
    }
  }
  return scores;
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_BODY_INL_H_
