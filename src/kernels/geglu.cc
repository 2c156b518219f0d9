// GeGlu: per-target instantiation of geglu-inl.h and the dispatching entry.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/geglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/geglu-inl.h"

#if HWY_ONCE
#include "kernels/kernels.h"

namespace slm::kernels {

HWY_EXPORT(GeGlu);
HWY_EXPORT(GeGluErf);

void GeGlu(const float* gate, const float* up, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeGlu)(gate, up, y, n);
}

void GeGluErf(const float* gate, const float* up, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeGluErf)(gate, up, y, n);
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
