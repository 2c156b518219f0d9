// Attention: per-target instantiation of attention-inl.h, the dispatching entry point, and the
// test counter of computed scores.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/attention-inl.h"

#if HWY_ONCE
#include <atomic>

#include "kernels/kernels.h"

namespace slm::kernels {
namespace {
// One relaxed add per call (not per score), so the counter costs nothing measurable.
std::atomic<int64_t> g_attention_scores{0};
}  // namespace

HWY_EXPORT(Attention);
HWY_EXPORT(FindVisibleRunsForTest);

void Attention(const float* q, const float* k, const float* v, const float* k_cache,
               const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
               int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float softcap) {
  const int64_t scores = HWY_DYNAMIC_DISPATCH(Attention)(q, k, v, k_cache, v_cache, mask, out,
                                                         scratch, T, L, n_heads, n_kv_heads,
                                                         head_dim, scale, softcap, 0, n_heads);
  g_attention_scores.fetch_add(scores, std::memory_order_relaxed);
}

void AttentionHeads(const float* q, const float* k, const float* v, const float* k_cache,
                    const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
                    int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                    float softcap, int64_t h_begin, int64_t h_end) {
  const int64_t scores = HWY_DYNAMIC_DISPATCH(Attention)(q, k, v, k_cache, v_cache, mask, out,
                                                         scratch, T, L, n_heads, n_kv_heads,
                                                         head_dim, scale, softcap, h_begin, h_end);
  g_attention_scores.fetch_add(scores, std::memory_order_relaxed);
}

int64_t FindVisibleRunsForTest(const float* mask, int64_t n, int32_t* bounds) {
  return HWY_DYNAMIC_DISPATCH(FindVisibleRunsForTest)(mask, n, bounds);
}

int64_t AttentionScoresComputedForTest() {
  return g_attention_scores.load(std::memory_order_relaxed);
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
