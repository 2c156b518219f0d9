// AVX-512 VNNI versions of the dynamic-activation quantized products of quant_kernels.h, used by
// their dispatch when the CPU has avx512vnni. Same contracts as MatMulQ8DynColumns /
// MatMulQ4DynColumns; each returns false (and writes nothing) when it cannot run: no VNNI on this
// CPU or in this build, K not a multiple of 64, or an unsupported group.
#pragma once

#include <cstdint>

namespace slm::kernels {

// True when the CPU has AVX-512 VNNI and SLM_DISABLE_VNNI is unset (or "0"); read once.
bool VnniAvailable();
// Tests: false routes the dispatch to the Highway bodies even on a VNNI CPU.
void SetVnniEnabledForTest(bool enabled);

// Roofline probe: `iters` rounds of 12 independent vpdpbusd chains in registers; returns the
// int8 OPs done (2 per u8·s8 product), 0 when VNNI is not available.
double VnniDotLoop(int64_t iters, int32_t* sink);

bool MatMulQ8DynColumnsVnni(const int8_t* xq, const float* xscale, const int8_t* w,
                            const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                            int64_t N, int64_t n_begin, int64_t n_end);

bool MatMulQ4DynColumnsVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                            const uint8_t* w, const float* scales, const float* offsets,
                            const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                            int64_t n_begin, int64_t n_end);

// AVX-VNNI (256-bit vpdpbusd without AVX-512, matmul_q_avxvnni.cc): the dispatch's second
// choice, for decode (R < kAvxVnniMaxRows) and prefill chunks (R >= kAvxVnniPanelRows). Same
// contracts; false (nothing written) when the CPU lacks AVX-VNNI, the AVX-512 VNNI bodies are in
// use, SLM_DISABLE_VNNI or SLM_DISABLE_AVX_VNNI is set, R is between the two, K is not a multiple
// of 32 (Q8) / 64 (Q4), or G is not a multiple of 32 (the decode tiles: 32 or a multiple of 64).
constexpr int64_t kAvxVnniMaxRows = 4;
bool AvxVnniAvailable();
// Tests and `--simd-target`: false routes the dispatch past the AVX-VNNI bodies.
void SetAvxVnniEnabledForTest(bool enabled);
// Roofline probe: as VnniDotLoop with 256-bit vpdpbusd; 0 when AVX-VNNI is not available.
double AvxVnniDotLoop(int64_t iters, int32_t* sink);
bool MatMulQ8DynColumnsAvxVnni(const int8_t* xq, const float* xscale, const int8_t* w,
                               const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                               int64_t N, int64_t n_begin, int64_t n_end);
bool MatMulQ4DynColumnsAvxVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                               int64_t n_begin, int64_t n_end);

// From kAvxVnniPanelRows rows the AVX-VNNI functions run the 256-bit panel GEMMs of
// matmul_q_avxvnni_panel.cc (rows 4 to kAvxVnniPanelRows − 1 stay on the Highway tiles); same
// contracts and the Q8 xsum as below. 8: a zero-padded 16-row panel already beats the Highway
// AVX2 tiles at 8 rows (8da4w 1.7×, 8da8w level; 12 rows 1.4–2.5×), not at 4.
constexpr int64_t kAvxVnniPanelRows = 8;
void MatMulQ8DynPanelAvxVnni(const int8_t* xq, const float* xscale, const int32_t* xsum,
                             const int8_t* w, const float* scales, const float* bias, float* y,
                             int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end);
void MatMulQ4DynPanelAvxVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                             const uint8_t* w, const float* scales, const float* offsets,
                             const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                             int64_t n_begin, int64_t n_end);

// Prefill-shaped products (R >= kVnniPanelRows) go to the panel GEMMs of
// matmul_q_vnni_panel.cc: same contracts, called by the two functions above once they have
// checked VNNI, K % 64 == 0 and the group (G % 32 == 0). Q8 also takes xsum [R] = Σ_k xq[r, k],
// which the caller computed for its own tiles anyway.
constexpr int64_t kVnniPanelRows = 32;
void MatMulQ8DynPanelVnni(const int8_t* xq, const float* xscale, const int32_t* xsum,
                          const int8_t* w, const float* scales, const float* bias, float* y,
                          int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end);
void MatMulQ4DynPanelVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                          const uint8_t* w, const float* scales, const float* offsets,
                          const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                          int64_t n_begin, int64_t n_end);

}  // namespace slm::kernels
