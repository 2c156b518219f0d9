// MatMulF32: per-target instantiation of matmul-inl.h and the dispatching entry points.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/matmul-inl.h"

#if HWY_ONCE
#include "kernels/kernels.h"

namespace slm::kernels {

HWY_EXPORT(MatMulF32Columns);

void MatMulF32Columns(const float* x, const float* w, const float* bias, float* y, int64_t R,
                      int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(MatMulF32Columns)(x, w, bias, y, R, K, N, n_begin, n_end);
}

void MatMulF32(const float* x, const float* w, const float* bias, float* y, int64_t R, int64_t K,
               int64_t N) {
  HWY_DYNAMIC_DISPATCH(MatMulF32Columns)(x, w, bias, y, R, K, N, 0, N);
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
