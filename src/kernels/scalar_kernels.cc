// Kernels that are pure data movement (Embedding, KvCommit) or cheap next to the matmuls around
// them (Rope: O(T·H·hd) work, cos/sin once per row and pair): no SIMD version would pay off yet,
// so the public entry points are the scalar reference.
#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace slm::kernels {

bool Embedding(const int32_t* ids, const float* table, float* out, int64_t T, int64_t V,
               int64_t D, float multiplier) {
  return reference::Embedding(ids, table, out, T, V, D, multiplier);
}

void Rope(const float* x, const int32_t* pos, const float* inv_freq, float* y, int64_t T,
          int64_t n_heads, int64_t head_dim, int64_t rotary_dim, float attention_scaling) {
  reference::Rope(x, pos, inv_freq, y, T, n_heads, head_dim, rotary_dim, attention_scaling);
}

int64_t RopeTableIndex(const int32_t* pos, int64_t T, int64_t switch_len) {
  int64_t max_pos = -1;
  for (int64_t t = 0; t < T; ++t) max_pos = std::max<int64_t>(max_pos, pos[t]);
  return max_pos >= 0 && max_pos + 1 > switch_len ? 1 : 0;
}

void KvCommit(const float* k, const float* v, const int32_t* pos, float* k_cache, float* v_cache,
              int64_t T, int64_t L, int64_t n_kv_heads, int64_t head_dim) {
  reference::KvCommit(k, v, pos, k_cache, v_cache, T, L, n_kv_heads, head_dim);
}

}  // namespace slm::kernels
