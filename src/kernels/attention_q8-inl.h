// Highway bodies of the int8-KV kernels (kernels/attention_q8.h), compiled once per SIMD target
// via attention_q8.cc: row quantization, and AttentionQ8 as the shared body of
// attention_body-inl.h (the f32 kernel's walk and softmax) over int8 rows with per-row scales.

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

#include "hwy/highway.h"
#include "kernels/attention_body-inl.h"
#include "kernels/attention_rows.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
  return AttentionBody(q, KvRows<int8_t>(k_cache, kc_scale, k, k_scale, L, n_kv_heads, head_dim),
                       KvRows<int8_t>(v_cache, vc_scale, v, v_scale, L, n_kv_heads, head_dim), mask,
                       out, scratch, T, L, n_heads, n_kv_heads, head_dim, scale, softcap, h_begin,
                       h_end);
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_Q8_INL_H_
