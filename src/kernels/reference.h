// Scalar reference kernels: the ground truth the SIMD kernels are tested against, and a
// portable fallback. Same signatures and semantics as kernels.h. Written for clarity, not
// speed: plain loops, reductions accumulated in double so that the reference is closer to the
// exact result than any float32 implementation (PyTorch's included).
#pragma once

#include <cstdint>

namespace slm::kernels::reference {

void MatMulF32(const float* x, const float* w, const float* bias, float* y, int64_t R, int64_t K,
               int64_t N);
void RmsNorm(const float* x, const float* w, float* y, int64_t R, int64_t D, float eps,
             bool add_one);
[[nodiscard]] bool Embedding(const int32_t* ids, const float* table, float* out, int64_t T,
                             int64_t V, int64_t D, float multiplier);
void Rope(const float* x, const int32_t* pos, const float* inv_freq, float* y, int64_t T,
          int64_t n_heads, int64_t head_dim, int64_t rotary_dim, float attention_scaling);
// scratch: >= L+T floats, as in kernels.h.
void Attention(const float* q, const float* k, const float* v, const float* k_cache,
               const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
               int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float softcap);
void KvCommit(const float* k, const float* v, const int32_t* pos, float* k_cache, float* v_cache,
              int64_t T, int64_t L, int64_t n_kv_heads, int64_t head_dim);
void Add(const float* a, const float* b, float* y, int64_t n);
void SwiGlu(const float* gate, const float* up, float* y, int64_t n);
void GeluTanh(const float* x, float* y, int64_t n);
void GeGlu(const float* gate, const float* up, float* y, int64_t n);
void GeluErf(const float* x, float* y, int64_t n);  // exact GELU, std::erf
void GeGluErf(const float* gate, const float* up, float* y, int64_t n);
void SoftCap(float* x, int64_t n, float cap);

}  // namespace slm::kernels::reference
