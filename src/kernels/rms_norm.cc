// RmsNorm: per-target instantiation of rms_norm-inl.h and the dispatching entry point.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rms_norm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/rms_norm-inl.h"

#if HWY_ONCE
#include "kernels/kernels.h"

namespace slm::kernels {

HWY_EXPORT(RmsNorm);

void RmsNorm(const float* x, const float* w, float* y, int64_t R, int64_t D, float eps,
             bool add_one) {
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, w, y, R, D, eps, add_one);
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
