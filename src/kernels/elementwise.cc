// Element-wise kernels: per-target instantiation of elementwise-inl.h and dispatching entries.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/elementwise-inl.h"

#if HWY_ONCE
#include "kernels/kernels.h"

namespace slm::kernels {

HWY_EXPORT(Add);
HWY_EXPORT(SwiGlu);
HWY_EXPORT(GeluTanh);
HWY_EXPORT(SoftCap);

void Add(const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Add)(a, b, y, n);
}
void SwiGlu(const float* gate, const float* up, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SwiGlu)(gate, up, y, n);
}
void GeluTanh(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluTanh)(x, y, n); }
void SoftCap(float* x, int64_t n, float cap) { HWY_DYNAMIC_DISPATCH(SoftCap)(x, n, cap); }

}  // namespace slm::kernels
#endif  // HWY_ONCE
