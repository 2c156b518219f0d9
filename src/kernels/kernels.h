// The math the CPU runtime calls, one function per graph op (see graph/graph.h OpKind).
//
// Conventions for every kernel here:
//  - plain pointers, row-major, float32; shapes are the integer arguments, named as in the
//    comments ([R,K] = R rows of K contiguous floats);
//  - no allocation: kernels that need temporary memory take a caller-owned `scratch`;
//  - preconditions (positive sizes, divisibility, non-null pointers) are the caller's job; the
//    graph validator / runtime check them once at load time, not on every call;
//  - no aliasing between outputs and inputs unless a kernel says "may run in place";
//  - numerics follow Hugging Face/PyTorch float32 (same formula, same operation order); SIMD
//    versions differ from kernels::reference (which sums in double) only by float32 summation
//    order and by the last ulps of exp/tanh (tests/kernels states the tolerances that hold).
//
// The functions below dispatch at run time (Highway HWY_DYNAMIC_DISPATCH) to the best SIMD
// target this CPU supports. The scalar ground truth lives in kernels/reference.h.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kernels/attention_scratch.h"

namespace slm::kernels {

// y[R,N] = x[R,K] · w[N,K]ᵀ (+ bias[N] when bias != nullptr). w is in HF [out,in] layout.
// y must not overlap x, w or bias.
void MatMulF32(const float* x, const float* w, const float* bias, float* y, int64_t R, int64_t K,
               int64_t N);

// Columns [n_begin, n_end) of MatMulF32 only: writes y[r, n] for those n, leaves the rest of y
// untouched. Lets a caller split one product (including the R = 1 decode case) over threads.
void MatMulF32Columns(const float* x, const float* w, const float* bias, float* y, int64_t R,
                      int64_t K, int64_t N, int64_t n_begin, int64_t n_end);

// y[R,D] = x * rsqrt(mean(x², over D) + eps) * g, with g = w, or (1 + w) when add_one (Gemma).
// Computed in HF's order: variance in float32, x * rsqrt(variance + eps), then * g.
// May run in place (y == x).
void RmsNorm(const float* x, const float* w, float* y, int64_t R, int64_t D, float eps,
             bool add_one);

// out[T,D] = table[ids[t], :] * multiplier (multiplier: 1 for Llama, √D for Gemma).
// Returns false, writing nothing, when any id is outside [0, V); never reads out of bounds.
[[nodiscard]] bool Embedding(const int32_t* ids, const float* table, float* out, int64_t T,
                             int64_t V, int64_t D, float multiplier);

// HF rotate_half RoPE. x, y: [T, n_heads*head_dim]; pos: [T]; inv_freq: [rotary_dim/2].
// For row t with pos[t] >= 0, head h, i < rot/2: angle = float(pos[t]) * inv_freq[i] (float32
// product, as torch's inv_freq @ pos), c = cos(angle)*attention_scaling, s = sin(angle)*scaling,
// y[i] = x[i]*c - x[i+rot/2]*s, y[i+rot/2] = x[i+rot/2]*c + x[i]*s. Dims >= rotary_dim are
// copied; rows with pos[t] < 0 (padding) are copied unchanged. May run in place (y == x).
void Rope(const float* x, const int32_t* pos, const float* inv_freq, float* y, int64_t T,
          int64_t n_heads, int64_t head_dim, int64_t rotary_dim, float attention_scaling);

// Longrope table of one call (pos: [T]): 1 (long factors) iff the largest pos[t] >= 0 has
// pos[t] + 1 > switch_len, else 0 (short factors; also when every row is padding). This is
// transformers' longrope_frequency_update, seq_len = max(position_ids) + 1, per forward call.
int64_t RopeTableIndex(const int32_t* pos, int64_t T, int64_t switch_len);

// Scratch floats Attention / AttentionHeads / AttentionQ8* need (attention_scratch.h): score
// rows for a batch of heads, the mask row's runs of visible columns and, for calls of
// kAttentionKeyBlockRows rows or more, one kv head's keys transposed. Requires n_kv_heads > 0.
inline int64_t AttentionScratchFloats(int64_t L, int64_t T, int64_t n_heads, int64_t n_kv_heads,
                                      int64_t head_dim) {
  return AttentionScratchLayout::For(L, T, n_heads, n_kv_heads, head_dim).total;
}

// Attention of this call's T rows over [L cache slots ; T new rows].
//   q [T, Hq*hd], k/v [T, Hkv*hd] (this call's rows), k_cache/v_cache [Hkv, L, hd],
//   mask [T, L+T] additive (0 visible, -inf hidden), out [T, Hq*hd],
//   scratch >= AttentionScratchFloats(L, T, Hq, Hkv, hd) floats.
// Row t, head h uses kv head h / (Hq/Hkv) (Hq % Hkv == 0). For each visible column:
//   s = (q·k) * scale; if softcap > 0: s = softcap * tanh(s / softcap); s += mask.
// Softmax in float32 over visible columns (max subtracted), out = Σ p·v. Columns whose mask is
// -inf contribute exactly 0 and their values are never read; their keys are read only in calls of
// kAttentionKeyBlockRows rows or more, which transpose the keys of a vector's lanes of columns
// together once any row sees one of them (the scores of the hidden ones are discarded). The cost
// is proportional to the visible columns (rounded up to whole vectors of columns in those calls)
// plus one scan of each mask row. Chunked prefill and one-row calls give the same bits. A row with no visible column gets out = 0 (torch would give
// NaN; hf_static v1 never builds such a row). out must not overlap any input.
void Attention(const float* q, const float* k, const float* v, const float* k_cache,
               const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
               int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float softcap);

// Heads [h_begin, h_end) of Attention only (same arguments; writes only those heads' columns of
// out). Lets a caller split attention over threads, each with its own scratch (same size).
void AttentionHeads(const float* q, const float* k, const float* v, const float* k_cache,
                    const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
                    int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                    float softcap, int64_t h_begin, int64_t h_end);

// For t ascending with pos[t] >= 0: k_cache[h, pos[t] % L, :] = k[t, h*hd : (h+1)*hd], same for
// v. k/v: [T, Hkv*hd]; caches: [Hkv, L, hd]. Rows with pos[t] < 0 are skipped.
void KvCommit(const float* k, const float* v, const int32_t* pos, float* k_cache, float* v_cache,
              int64_t T, int64_t L, int64_t n_kv_heads, int64_t head_dim);

// y[n] = a + b. May run in place (y == a or y == b).
void Add(const float* a, const float* b, float* y, int64_t n);

// y[n] = silu(gate) * up, silu(g) = g / (1 + exp(-g)) in float32. May run in place.
void SwiGlu(const float* gate, const float* up, float* y, int64_t n);

// y[n] = torch gelu(x, approximate='tanh') = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// May run in place.
void GeluTanh(const float* x, float* y, int64_t n);

// y[n] = gelu_tanh(gate) * up (GeluTanh's formula, then the product; Gemma's GeGLU MLP).
// May run in place (y == gate or y == up).
void GeGlu(const float* gate, const float* up, float* y, int64_t n);

// y[n] = gelu(gate) * up with exact GELU, torch gelu(approximate='none'):
// gelu(g) = (g·0.5)·(1 + erf(g·√½)) (Gemma configs with hidden_act "gelu"). erf is a
// polynomial·exp form with absolute error <= 1.5e-7. May run in place (y == gate or y == up).
void GeGluErf(const float* gate, const float* up, float* y, int64_t n);

// x[n] = cap * tanh(x / cap), in place (Gemma 2 logit soft-capping).
void SoftCap(float* x, int64_t n, float cap);

// ---- SIMD target introspection (stats, benchmarks, tests) ----

// Name of the Highway target the kernels above dispatch to now ("AVX3", "AVX2", "SSE4", ...).
const char* ActiveSimdTarget();
// Name of the best Highway target this CPU supports in this build (what "best" selects).
const char* BestSimdTarget();

// The intrinsics bodies that run beside that target's code for the quantized products: "VNNI"
// (AVX-512 VNNI), "VNNI+AMX" (and the AMX panels of the 8da4w / 8da8w prefill products), "AVX-VNNI",
// "DOTPROD" (Arm sdot), "DOTPROD+I8MM" (and smmla), or "" when none does.
const char* ActiveIntrinsicBodies();

// Highway targets (HWY_* bits, best first) compiled into slm_kernels that this CPU supports.
// Computed on the first call, which must happen before any ForceSimdTargetForTest.
const std::vector<int64_t>& SupportedSimdTargets();

// Makes every kernel use the Highway target `name` (case-insensitive, as ActiveSimdTarget names
// targets: "AVX2", "SSE4", "NEON", "SVE_256", ...) instead of the best this CPU has, to measure
// or debug another target's code on one machine; the AVX-512 VNNI bodies stay in use only with
// the AVX3 targets, so "AVX2" runs what a plain AVX2 CPU runs. "best" restores the normal choice.
// InvalidArgument, listing the supported targets, for any other name. Process-wide: call before
// kernels run (staticlm: the --simd-target option or $SLM_SIMD_TARGET).
Status SelectSimdTarget(std::string_view name);

// Test hook: makes every kernel dispatch to `target` (one bit of SupportedSimdTargets());
// 0 restores normal dispatch. Process-wide; do not call while kernels run on other threads.
void ForceSimdTargetForTest(int64_t target);

// Test hook: total number of (row, head, column) attention scores the dispatched Attention has
// computed in this process. Lets tests check that hidden columns cost nothing.
int64_t AttentionScoresComputedForTest();

// Test hook: the dispatched vector scan of an attention-mask row [n] into runs of visible columns
// (bounds: [n + 1] int32, as visible_runs.h); returns the number of runs.
int64_t FindVisibleRunsForTest(const float* mask, int64_t n, int32_t* bounds);

}  // namespace slm::kernels
