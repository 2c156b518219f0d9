// Highway body of RmsNorm, compiled once per SIMD target via rms_norm.cc.
// Per row: sum of squares with four independent vector accumulators (short dependency chains,
// and partial sums over D/(4·lanes) terms each keep float32 rounding error small), then HF's
// x * rsqrt(variance + eps) * g. rsqrt is an exact 1/sqrt, not the approximate SIMD rsqrt, whose
// ~12-bit precision would break the 1e-4 agreement with PyTorch.

#if defined(SLM_KERNELS_RMS_NORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_RMS_NORM_INL_H_
#undef SLM_KERNELS_RMS_NORM_INL_H_
#else
#define SLM_KERNELS_RMS_NORM_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE float SumOfSquares(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * NL <= n; i += 4 * NL) {
    const auto v0 = hn::LoadU(d, x + i), v1 = hn::LoadU(d, x + i + NL);
    const auto v2 = hn::LoadU(d, x + i + 2 * NL), v3 = hn::LoadU(d, x + i + 3 * NL);
    s0 = hn::MulAdd(v0, v0, s0);
    s1 = hn::MulAdd(v1, v1, s1);
    s2 = hn::MulAdd(v2, v2, s2);
    s3 = hn::MulAdd(v3, v3, s3);
  }
  for (; i + NL <= n; i += NL) {
    const auto v = hn::LoadU(d, x + i);
    s0 = hn::MulAdd(v, v, s0);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

// y[i] = (x[i] * inv_rms) * (w[i] or 1 + w[i]); y may equal x.
template <class D>
HWY_INLINE void ScaleRow(D d, const float* x, const float* w, float* y, size_t i, float inv_rms,
                         bool add_one) {
  auto g = hn::LoadU(d, w + i);
  if (add_one) g = hn::Add(hn::Set(d, 1.0f), g);
  hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), hn::Set(d, inv_rms)), g), d, y + i);
}

void RmsNorm(const float* x, const float* w, float* y, int64_t R, int64_t D, float eps,
             bool add_one) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t NL = hn::Lanes(d);
  const size_t n = size_t(D);
  for (size_t r = 0; r < size_t(R); ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float variance = SumOfSquares(xr, n) / float(D);
    const float inv_rms = 1.0f / std::sqrt(variance + eps);
    size_t i = 0;
    for (; i + NL <= n; i += NL) ScaleRow(d, xr, w, yr, i, inv_rms, add_one);
    for (; i < n; ++i) ScaleRow(d1, xr, w, yr, i, inv_rms, add_one);
  }
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_RMS_NORM_INL_H_
