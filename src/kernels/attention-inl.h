// Highway body of Attention, compiled once per SIMD target via attention.cc.
//
// Per row t the mask row is scanned once into a VisibleColumns index (shared by all heads);
// per head, three walks over the visible columns only: scores (SIMD dot products over
// head_dim), exp / sum (scalar: one exp per column is cheap next to a head_dim-long dot), and
// out += p·v (SIMD). Scores live in the scratch slots of their own columns. Softmax follows
// torch: subtract the max, exp, divide by the sum, then multiply the probabilities with v.

#if defined(SLM_KERNELS_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ATTENTION_INL_H_
#undef SLM_KERNELS_ATTENTION_INL_H_
#else
#define SLM_KERNELS_ATTENTION_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
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

// Returns the number of (row, head, column) scores computed, for the test counter.
int64_t Attention(const float* q, const float* k, const float* v, const float* k_cache,
                  const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
                  int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                  float softcap, int64_t h_begin, int64_t h_end) {
  const int64_t cols = L + T;
  const int64_t group = n_heads / n_kv_heads;
  const size_t hd = size_t(head_dim);
  // Row of column c for kv head g: cache slot c < L, else this call's row c - L.
  auto row = [&](const float* cache, const float* fresh, int64_t g, int64_t c) {
    return c < L ? cache + (g * L + c) * head_dim : fresh + ((c - L) * n_kv_heads + g) * head_dim;
  };
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
        float s = Dot(qh, row(k_cache, k, g, c), hd) * scale;
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
        const float p = float(scratch[c] / sum);
        MulAddTo(p, row(v_cache, v, g, c), oh, hd);
      }
      scores += vis.count();
    }
  }
  return scores;
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_INL_H_
