// Highway body of GeGlu (Gemma's MLP activation), compiled once per SIMD target via geglu.cc.
// Same per-element math as GeluTanh in elementwise-inl.h, fused with the multiply by `up` so
// the MLP needs one pass and no temporary; the tail runs the same lambda on one-lane vectors.

#if defined(SLM_KERNELS_GEGLU_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_GEGLU_INL_H_
#undef SLM_KERNELS_GEGLU_INL_H_
#else
#define SLM_KERNELS_GEGLU_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// gelu_tanh(g) * u on one vector, in torch's operation order (see reference::GeGlu).
template <class D, class V>
HWY_INLINE V GeGluVec(D d, V g, V u) {
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5);  // √(2/π), as torch writes it
  const auto cube = hn::Mul(hn::Mul(g, g), g);
  const auto inner = hn::Mul(hn::Set(d, kBeta), hn::Add(g, hn::Mul(hn::Set(d, 0.044715f), cube)));
  const auto half_g = hn::Mul(hn::Set(d, 0.5f), g);
  const auto gelu = hn::Mul(half_g, hn::Add(hn::Set(d, 1.0f), hn::Tanh(d, inner)));
  return hn::Mul(gelu, u);
}

void GeGlu(const float* gate, const float* up, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  const size_t count = size_t(n);
  size_t i = 0;
  for (; i + NL <= count; i += NL) {
    hn::StoreU(GeGluVec(d, hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, y + i);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) {
    hn::StoreU(GeGluVec(d1, hn::LoadU(d1, gate + i), hn::LoadU(d1, up + i)), d1, y + i);
  }
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_GEGLU_INL_H_
