// Int8-KV kernels: per-target instantiation of attention_q8-inl.h, the dispatching entry points,
// the (byte-copying) commit, and the scalar references.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_q8.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/attention_q8-inl.h"

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "kernels/attention_q8.h"
#include "kernels/attention_rows.h"

namespace slm::kernels {

namespace {
// One relaxed add per call (as attention.cc's counter for the f32 kernel).
std::atomic<int64_t> g_q8_scores{0};
void AddAttentionScoresForTest(int64_t n) { g_q8_scores.fetch_add(n, std::memory_order_relaxed); }
}  // namespace

int64_t AttentionQ8ScoresComputedForTest() { return g_q8_scores.load(std::memory_order_relaxed); }

HWY_EXPORT(QuantizeKvRows);
HWY_EXPORT(AttentionQ8);

void QuantizeKvRows(const float* x, int8_t* q, float* scales, int64_t R, int64_t H,
                    int64_t head_dim) {
  HWY_DYNAMIC_DISPATCH(QuantizeKvRows)(x, q, scales, R, H, head_dim);
}

void AttentionQ8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                 const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                 float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                 int64_t head_dim, float scale, float softcap) {
  AttentionQ8Heads(q, k, k_scale, v, v_scale, k_cache, kc_scale, v_cache, vc_scale, mask, out,
                   scratch, T, L, n_heads, n_kv_heads, head_dim, scale, softcap, 0, n_heads);
}

void AttentionQ8Heads(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                      const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                      const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                      float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                      int64_t head_dim, float scale, float softcap, int64_t h_begin,
                      int64_t h_end) {
  AddAttentionScoresForTest(HWY_DYNAMIC_DISPATCH(AttentionQ8)(
      q, k, k_scale, v, v_scale, k_cache, kc_scale, v_cache, vc_scale, mask, out, scratch, T, L,
      n_heads, n_kv_heads, head_dim, scale, softcap, h_begin, h_end));
}

void KvCommitQ8(const int8_t* k, const float* k_scale, const int8_t* v, const float* v_scale,
                const int32_t* pos, int8_t* k_cache, float* kc_scale, int8_t* v_cache,
                float* vc_scale, int64_t T, int64_t L, int64_t n_kv_heads, int64_t head_dim) {
  for (int64_t t = 0; t < T; ++t) {
    if (pos[t] < 0) continue;
    const int64_t slot = pos[t] % L;
    for (int64_t h = 0; h < n_kv_heads; ++h) {
      const int64_t src = t * n_kv_heads + h, dst = h * L + slot;
      std::memcpy(k_cache + dst * head_dim, k + src * head_dim, size_t(head_dim));
      std::memcpy(v_cache + dst * head_dim, v + src * head_dim, size_t(head_dim));
      kc_scale[dst] = k_scale[src];
      vc_scale[dst] = v_scale[src];
    }
  }
}

namespace reference {

void QuantizeKvRows(const float* x, int8_t* q, float* scales, int64_t R, int64_t H,
                    int64_t head_dim) {
  for (int64_t r = 0; r < R * H; ++r) {
    const float* xr = x + r * head_dim;
    float amax = 0.0f;
    for (int64_t i = 0; i < head_dim; ++i) amax = std::max(amax, std::fabs(xr[i]));
    scales[r] = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t i = 0; i < head_dim; ++i) {
      q[r * head_dim + i] = int8_t(std::clamp(std::nearbyint(xr[i] * inv), -127.0f, 127.0f));
    }
  }
}

void AttentionQ8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                 const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                 float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                 int64_t head_dim, float scale, float softcap) {
  AttentionOverRows(q, KvRows<int8_t>(k_cache, kc_scale, k, k_scale, L, n_kv_heads, head_dim),
                    KvRows<int8_t>(v_cache, vc_scale, v, v_scale, L, n_kv_heads, head_dim), mask,
                    out, scratch, T, L, n_heads, n_kv_heads, head_dim, scale, softcap);
}

}  // namespace reference
}  // namespace slm::kernels
#endif  // HWY_ONCE
