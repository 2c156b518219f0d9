// Quantized matrix products: per-target instantiation of matmul_q-inl.h and dispatch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_q.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/matmul_q-inl.h"

#if HWY_ONCE
#include <atomic>
#include <string_view>

#include "kernels/cpu_feature.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q4_split_x.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/quant_kernels.h"

namespace slm::kernels {

namespace {
std::atomic<int> int4_decode_x16{-1};  // -1: not read from the environment yet
}  // namespace

bool Int4DecodeX16Enabled() {
  int on = int4_decode_x16.load(std::memory_order_relaxed);
  if (on < 0) {  // racing first calls read the same answer
    on = SwitchedOnInEnvironment("SLM_INT4_X16") ? 1 : 0;
    int4_decode_x16.store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

void SetInt4DecodeX16(bool enabled) { int4_decode_x16.store(enabled ? 1 : 0, std::memory_order_relaxed); }

bool Int4DecodeX16Applies() {
  return HWY_ARCH_X86 && std::string_view(ActiveSimdTarget()) == "AVX2" && !VnniAvailable() && !AvxVnniAvailable();
}

bool Int4DecodeX16InUse() { return Int4DecodeX16Enabled() && Int4DecodeX16Applies(); }

HWY_EXPORT(MatMulQ8Columns);
HWY_EXPORT(MatMulQ4Columns);
HWY_EXPORT(MatMulQ8DynColumns);
HWY_EXPORT(MatMulQ4DynColumns);
HWY_EXPORT(QuantizeRowsI8);

void QuantizeRowsI8(const float* x, int8_t* xq, float* xscale, int32_t* group_sums, int64_t R,
                    int64_t K, int64_t G) {
  HWY_DYNAMIC_DISPATCH(QuantizeRowsI8)(x, xq, xscale, group_sums, R, K, G);
}

void MatMulQ8Columns(const float* x, const int8_t* w, const float* scales, const float* bias,
                     float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  if (MatMulQ8ColumnsSplitXAvxVnni(x, w, scales, bias, y, R, K, N, n_begin, n_end) ||
      MatMulQ8ColumnsSplitXDotprod(x, w, scales, bias, y, R, K, N, n_begin, n_end)) {
    return;
  }
  HWY_DYNAMIC_DISPATCH(MatMulQ8Columns)(x, w, scales, bias, y, R, K, N, n_begin, n_end);
}

void MatMulQ4Columns(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                     const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                     int64_t n_begin, int64_t n_end) {
  if (MatMulQ4ColumnsSplitX(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end) ||
      MatMulQ4ColumnsSplitXAvxVnni(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end) ||
      MatMulQ4ColumnsSplitXDotprod(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end)) {
    return;
  }
  HWY_DYNAMIC_DISPATCH(MatMulQ4Columns)(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
}

void MatMulQ8DynColumns(const int8_t* xq, const float* xscale, const int8_t* w,
                        const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                        int64_t N, int64_t n_begin, int64_t n_end) {
  if (MatMulQ8DynColumnsVnni(xq, xscale, w, scales, bias, y, R, K, N, n_begin, n_end) ||
      MatMulQ8DynColumnsAvxVnni(xq, xscale, w, scales, bias, y, R, K, N, n_begin, n_end) ||
      MatMulQ8DynColumnsDotprod(xq, xscale, w, scales, bias, y, R, K, N, n_begin, n_end)) {
    return;
  }
  HWY_DYNAMIC_DISPATCH(MatMulQ8DynColumns)(xq, xscale, w, scales, bias, y, R, K, N, n_begin, n_end);
}

void MatMulQ4DynColumns(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                        const uint8_t* w, const float* scales, const float* offsets,
                        const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                        int64_t n_begin, int64_t n_end) {
  if (MatMulQ4DynColumnsVnni(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end) ||
      MatMulQ4DynColumnsAvxVnni(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end) ||
      MatMulQ4DynColumnsDotprod(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end)) {
    return;
  }
  HWY_DYNAMIC_DISPATCH(MatMulQ4DynColumns)(xq, xscale, group_sums, w, scales, offsets, bias, y, R,
                                           K, N, G, n_begin, n_end);
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
