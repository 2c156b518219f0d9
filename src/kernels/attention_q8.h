// Int8 KV caches (cache format "kv_int8_tokenhead_v1", docs/quantization.md): quantization of
// new K/V rows, their commit into the caches, and attention that reads the int8 rows.
//
// Layout and numerics of one cache (one layer's K or V):
//   rows   int8 [Hkv, L, hd]   (the f32 cache's layout, one byte per element)
//   scales f32  [Hkv, L]       one per (slot, head) row
// A row x[hd] is quantized symmetrically: amax = max|x[i]|, scale = amax / 127,
// inv = amax > 0 ? 127 / amax : 0, q[i] = round_half_even(x[i] * inv) clamped to [-127, 127];
// it stands for q[i] * scale. Every kernel below (SIMD and reference) uses exactly these float32
// operations, so the quantized bytes are identical on every target.
//
// Attention quantizes this call's own rows with the same formula before using them, so every
// key and value a query ever sees is the quantized one, whichever method (prefill chunk or
// one-token decode) computed it: chunked and one-token paths stay equal up to float32 order.
//
// Conventions as kernels.h: plain pointers, no allocation, preconditions checked at load.
#pragma once

#include <cstdint>

namespace slm::kernels {

// x [R, H*hd] f32 → q [R, H*hd] int8, scales [R, H] f32: each hd-long (row, head) chunk
// quantized on its own as above.
void QuantizeKvRows(const float* x, int8_t* q, float* scales, int64_t R, int64_t H,
                    int64_t head_dim);

// Attention of this call's T rows over [L cache slots ; T new rows], as kernels.h Attention,
// with every key / value row dequantized as q·scale:
//   q [T, Hq*hd] f32; k, v [T, Hkv*hd] int8 with k_scale, v_scale [T, Hkv] (this call's rows,
//   from QuantizeKvRows); k_cache, v_cache [Hkv, L, hd] int8 with kc_scale, vc_scale [Hkv, L];
//   mask [T, L+T]; out [T, Hq*hd]; scratch >= AttentionScratchFloats(L, T, Hq, Hkv) floats.
// Score = (Σ_i q[i]·k8[i]) · k_scale · scale (then softcap and mask, as f32 Attention); out =
// Σ_c p_c · v_scale_c · v8_c. Work is proportional to the visible columns.
void AttentionQ8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                 const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                 float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                 int64_t head_dim, float scale, float softcap);

// Heads [h_begin, h_end) of AttentionQ8 only (for splitting over threads; own scratch each).
void AttentionQ8Heads(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                      const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                      const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                      float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                      int64_t head_dim, float scale, float softcap, int64_t h_begin,
                      int64_t h_end);

// For t ascending with pos[t] >= 0: slot pos[t] % L of every head gets row t's int8 values and
// its scale, for K and V. k, v [T, Hkv*hd] int8; k_scale, v_scale [T, Hkv]; caches as above.
void KvCommitQ8(const int8_t* k, const float* k_scale, const int8_t* v, const float* v_scale,
                const int32_t* pos, int8_t* k_cache, float* kc_scale, int8_t* v_cache,
                float* vc_scale, int64_t T, int64_t L, int64_t n_kv_heads, int64_t head_dim);

// Test hook: (row, head, column) scores computed by the dispatched AttentionQ8 in this process.
int64_t AttentionQ8ScoresComputedForTest();

namespace reference {
// Scalar ground truth of the functions above (dot products and sums in double).
void QuantizeKvRows(const float* x, int8_t* q, float* scales, int64_t R, int64_t H,
                    int64_t head_dim);
void AttentionQ8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, const int8_t* k_cache, const float* kc_scale,
                 const int8_t* v_cache, const float* vc_scale, const float* mask, float* out,
                 float* scratch, int64_t T, int64_t L, int64_t n_heads, int64_t n_kv_heads,
                 int64_t head_dim, float scale, float softcap);
}  // namespace reference

}  // namespace slm::kernels
