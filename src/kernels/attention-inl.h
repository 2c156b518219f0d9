// Highway body of Attention, compiled once per SIMD target via attention.cc: the shared body of
// attention_body-inl.h (visible-column walk, softmax, p·v) over f32 rows.

#if defined(SLM_KERNELS_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_ATTENTION_INL_H_
#undef SLM_KERNELS_ATTENTION_INL_H_
#else
#define SLM_KERNELS_ATTENTION_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "kernels/attention_body-inl.h"
#include "kernels/attention_rows.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

// Returns the number of (row, head, column) scores computed, for the test counter.
int64_t Attention(const float* q, const float* k, const float* v, const float* k_cache,
                  const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
                  int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                  float softcap, int64_t h_begin, int64_t h_end) {
  return AttentionBody(q, KvRows<float>(k_cache, k, L, n_kv_heads, head_dim),
                       KvRows<float>(v_cache, v, L, n_kv_heads, head_dim), mask, out, scratch, T,
                       L, n_heads, n_kv_heads, head_dim, scale, softcap, h_begin, h_end);
}

// The vector scan of mask rows into visible runs, for the tests; returns the number of runs.
int64_t FindVisibleRunsForTest(const float* mask, int64_t n, int32_t* bounds) {
  return FindVisibleRunsVector(mask, n, bounds).runs();
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_ATTENTION_INL_H_
