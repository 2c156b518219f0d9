// Highway bodies of GeGlu and GeGluErf (Gemma's MLP activation, tanh-approximated or exact),
// compiled once per SIMD target via geglu.cc. GeGlu has the per-element math of GeluTanh in
// elementwise-inl.h, fused with the multiply by `up` so the MLP needs one pass and no temporary.
// Both entry points share one loop (GatedByUp), templated on the activation functor.

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

// gelu_tanh(g) on one vector, in torch's operation order (see reference::GeluTanh).
struct GeluTanhVec {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V g) const {
    const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5);  // √(2/π), as torch writes it
    const auto cube = hn::Mul(hn::Mul(g, g), g);
    const auto inner =
        hn::Mul(hn::Set(d, kBeta), hn::Add(g, hn::Mul(hn::Set(d, 0.044715f), cube)));
    const auto half_g = hn::Mul(hn::Set(d, 0.5f), g);
    return hn::Mul(half_g, hn::Add(hn::Set(d, 1.0f), hn::Tanh(d, inner)));
  }
};

// erf(z) for float32 lanes (Highway has no Erf). Abramowitz & Stegun 7.1.26 on |z| with the
// sign restored: erf(|z|) = 1 - poly(t)·exp(-z²), t = 1 / (1 + p·|z|), absolute error <= 1.5e-7
// (the same formula torch's vectorized CPU erf uses). GELU needs 1 + erf(z), so an absolute
// error bound is what matters: it is below one float32 ulp of 1.
template <class D, class V>
HWY_INLINE V ErfVec(D d, V z) {
  const auto a = hn::Abs(z);
  const auto t = hn::Div(hn::Set(d, 1.0f), hn::MulAdd(hn::Set(d, 0.3275911f), a, hn::Set(d, 1.0f)));
  auto poly = hn::MulAdd(hn::Set(d, 1.061405429f), t, hn::Set(d, -1.453152027f));
  poly = hn::MulAdd(poly, t, hn::Set(d, 1.421413741f));
  poly = hn::MulAdd(poly, t, hn::Set(d, -0.284496736f));
  poly = hn::MulAdd(poly, t, hn::Set(d, 0.254829592f));
  poly = hn::Mul(poly, t);
  // exp(-z²) underflows to 0 long before hwy::Exp's lower limit matters (|z| > ~10).
  const auto neg_sq = hn::Max(hn::Neg(hn::Mul(a, a)), hn::Set(d, -100.0f));
  const auto erf_abs = hn::NegMulAdd(poly, hn::Exp(d, neg_sq), hn::Set(d, 1.0f));
  return hn::CopySign(erf_abs, z);
}

// Exact gelu(g) on one vector, torch's order: (g · 0.5) · (1 + erf(g · √½)).
struct GeluErfVec {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V g) const {
    const auto erf = ErfVec(d, hn::Mul(g, hn::Set(d, float(M_SQRT1_2))));
    return hn::Mul(hn::Mul(g, hn::Set(d, 0.5f)), hn::Add(hn::Set(d, 1.0f), erf));
  }
};

// y = gelu(gate) * up, whole vectors then a one-lane tail through the same `Gelu`, so every
// element sees the same operations whatever its position.
template <class Gelu>
HWY_INLINE void GatedByUp(const float* gate, const float* up, float* y, int64_t n) {
  const Gelu gelu;
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  const size_t count = size_t(n);
  size_t i = 0;
  for (; i + NL <= count; i += NL) {
    hn::StoreU(hn::Mul(gelu(d, hn::LoadU(d, gate + i)), hn::LoadU(d, up + i)), d, y + i);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) {
    hn::StoreU(hn::Mul(gelu(d1, hn::LoadU(d1, gate + i)), hn::LoadU(d1, up + i)), d1, y + i);
  }
}

void GeGlu(const float* gate, const float* up, float* y, int64_t n) {
  GatedByUp<GeluTanhVec>(gate, up, y, n);
}

void GeGluErf(const float* gate, const float* up, float* y, int64_t n) {
  GatedByUp<GeluErfVec>(gate, up, y, n);
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_GEGLU_INL_H_
