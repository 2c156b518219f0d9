// Highway bodies of the int8-KV kernels (kernels/attention_q8.h), compiled once per SIMD target
// via attention_q8.cc. Same structure as attention-inl.h (one VisibleColumns scan per row, three
// walks over the visible columns per head), with int8 rows widened to f32 in registers:
// int8 → int32 → f32, then FMA with q (scores) or with p·scale (values). The row scale is folded
// into the score / probability once per column, never per element.

#if defined(SLM_KERNELS_ATTENTION_Q8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ATTENTION_Q8_INL_H_
#undef SLM_KERNELS_ATTENTION_Q8_INL_H_
#else
#define SLM_KERNELS_ATTENTION_Q8_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "kernels/visible_columns.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Σ a[i]·float(b[i]) over n; two accumulators as attention-inl.h's Dot.
HWY_INLINE float DotQ8(const float* HWY_RESTRICT a, const int8_t* HWY_RESTRICT b, size_t n) {
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

// out[i] += p * float(v[i]) for i < n (p already carries the row's scale).
HWY_INLINE void MulAddToQ8(float p, const int8_t* HWY_RESTRICT v, float* HWY_RESTRICT out,
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

void QuantizeKvRows(const float* x, int8_t* q, float* scales, int64_t R, int64_t H,
                    int64_t head_dim) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  const size_t hd = size_t(head_dim);
  for (int64_t r = 0; r < R * H; ++r) {
    const float* xr = x + r * head_dim;
    int8_t* qr = q + r * head_dim;
    auto vmax = hn::Zero(df);
    size_t i = 0;
    for (; i + NL <= hd; i += NL) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xr + i)));
    float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    for (; i < hd; ++i) amax = std::max(amax, std::fabs(xr[i]));
    scales[r] = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const auto vinv = hn::Set(df, inv);
    const auto lo = hn::Set(df, -127.0f), hi = hn::Set(df, 127.0f);
    i = 0;
    for (; i + NL <= hd; i += NL) {
      const auto v = hn::Min(hn::Max(hn::Round(hn::Mul(hn::LoadU(df, xr + i), vinv)), lo), hi);
      hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, v)), d8, qr + i);
    }
    for (; i < hd; ++i) {
      qr[i] = int8_t(std::clamp(std::nearbyint(xr[i] * inv), -127.0f, 127.0f));
    }
  }
}

// Returns the number of (row, head, column) scores computed (shared test counter).
int64_t AttentionQ8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                    const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                    const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                    float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                    int64_t head_dim, float scale, float softcap, int64_t h_begin, int64_t h_end) {
  const int64_t cols = L + T;
  const int64_t group = n_heads / n_kv_heads;
  const size_t hd = size_t(head_dim);
  // Row and scale of column c for kv head g: cache slot c < L, else this call's row c - L.
  auto row = [&](const int8_t* cache, const int8_t* fresh, int64_t g, int64_t c) {
    return c < L ? cache + (g * L + c) * head_dim : fresh + ((c - L) * n_kv_heads + g) * head_dim;
  };
  auto row_scale = [&](const float* cache, const float* fresh, int64_t g, int64_t c) {
    return c < L ? cache[g * L + c] : fresh[(c - L) * n_kv_heads + g];
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
        float s = DotQ8(qh, row(k_cache, k, g, c), hd) * row_scale(kc_scale, k_scale, g, c) * scale;
        if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
        s += mrow[c];
        scratch[c] = s;
        max_s = s > max_s ? s : max_s;
      }
      double sum = 0.0;
      for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
        scratch[c] = std::exp(scratch[c] - max_s);
        sum += scratch[c];
      }
      for (int64_t c = vis.first(); c < vis.end(); c = vis.Next(c)) {
        const float p = float(scratch[c] / sum) * row_scale(vc_scale, v_scale, g, c);
        MulAddToQ8(p, row(v_cache, v, g, c), oh, hd);
      }
      scores += vis.count();
    }
  }
  return scores;
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_Q8_INL_H_
