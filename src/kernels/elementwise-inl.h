// Highway bodies of the element-wise kernels (Add, SwiGlu, GeluTanh, SoftCap), compiled once
// per SIMD target via elementwise.cc. Each op is one vector lambda; the tail that does not fill
// a whole vector runs the same lambda on one-lane vectors, so every element gets the same math.

#if defined(SLM_KERNELS_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ELEMENTWISE_INL_H_
#undef SLM_KERNELS_ELEMENTWISE_INL_H_
#else
#define SLM_KERNELS_ELEMENTWISE_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y[i] = func(d, a[i]) for i < n. y may equal a (loads happen before the store of each vector).
template <class Func>
HWY_INLINE void Map1(const float* a, float* y, size_t n, const Func& func) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  size_t i = 0;
  for (; i + NL <= n; i += NL) hn::StoreU(func(d, hn::LoadU(d, a + i)), d, y + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) hn::StoreU(func(d1, hn::LoadU(d1, a + i)), d1, y + i);
}

// y[i] = func(d, a[i], b[i]) for i < n. y may equal a or b.
template <class Func>
HWY_INLINE void Map2(const float* a, const float* b, float* y, size_t n, const Func& func) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  size_t i = 0;
  for (; i + NL <= n; i += NL) {
    hn::StoreU(func(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, y + i);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) hn::StoreU(func(d1, hn::LoadU(d1, a + i), hn::LoadU(d1, b + i)), d1, y + i);
}

void Add(const float* a, const float* b, float* y, int64_t n) {
  Map2(a, b, y, size_t(n), [](auto d, auto va, auto vb) HWY_ATTR { return hn::Add(va, vb); });
}

void SwiGlu(const float* gate, const float* up, float* y, int64_t n) {
  Map2(gate, up, y, size_t(n), [](auto d, auto g, auto u) HWY_ATTR {
    // hwy::Exp is valid up to +104; beyond that exp(-g) is +inf in float anyway and silu → -0.
    const auto neg_g = hn::Min(hn::Neg(g), hn::Set(d, 104.0f));
    const auto silu = hn::Div(g, hn::Add(hn::Set(d, 1.0f), hn::Exp(d, neg_g)));
    return hn::Mul(silu, u);
  });
}

void GeluTanh(const float* x, float* y, int64_t n) {
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5);  // √(2/π), as torch writes it
  Map1(x, y, size_t(n), [kBeta](auto d, auto v) HWY_ATTR {
    const auto cube = hn::Mul(hn::Mul(v, v), v);
    const auto inner = hn::Mul(hn::Set(d, kBeta), hn::Add(v, hn::Mul(hn::Set(d, 0.044715f), cube)));
    const auto half_x = hn::Mul(hn::Set(d, 0.5f), v);
    return hn::Mul(half_x, hn::Add(hn::Set(d, 1.0f), hn::Tanh(d, inner)));
  });
}

void SoftCap(float* x, int64_t n, float cap) {
  Map1(x, x, size_t(n), [cap](auto d, auto v) HWY_ATTR {
    const auto vcap = hn::Set(d, cap);
    return hn::Mul(vcap, hn::Tanh(d, hn::Div(v, vcap)));
  });
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ELEMENTWISE_INL_H_
