// Intel AMX (advanced matrix extensions: 8 tile registers of 16 rows × 64 bytes, `tdpbssd` a
// 16×16×64 int8 product per instruction) for the prefill-shaped 8da8w and 8da4w products. Used by the
// AVX-512 VNNI dispatch (matmul_q_vnni.cc) from kVnniPanelRows rows when the CPU has AMX-INT8 and
// the OS let this process use the tile state; the columns it cannot take go to the VNNI panels.
#pragma once

#include <cstdint>

namespace slm::kernels {

// True when the CPU has AMX-TILE, AMX-INT8 and AVX-512 VNNI, the kernel granted this process the
// tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once), SLM_DISABLE_AMX is unset (or "0")
// and the VNNI bodies are in use (VnniAvailable()).
bool AmxAvailable();
// Tests and `--simd-target`: false routes the dispatch past the AMX bodies.
void SetAmxEnabledForTest(bool enabled);

// Roofline probe: `iters` rounds of 4 independent tdpbssd tile chains; returns the int8 OPs done
// (2 per s8·s8 product), 0 when AMX is not available.
double AmxDotLoop(int64_t iters, int32_t* sink);

// y[r, n] for r < R and n in [n_begin, n_end), as MatMulQ8DynColumns (quant_kernels.h), with the
// bits of the VNNI panels and the decode tiles: fma(float(Σ_k xq·w)·xscale[r], scales[n], bias[n]
// or 0). Returns the end of the columns it wrote, n_begin + a multiple of 16 (n_begin when AMX
// is not available or K % 64 != 0); the caller computes the rest.
int64_t MatMulQ8DynPanelAmx(const int8_t* xq, const float* xscale, const int8_t* w,
                            const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                            int64_t N, int64_t n_begin, int64_t n_end);

// The same for the 8da4w products (MatMulQ4DynColumns): the 8da4w order of quant_kernels.h, so
// the bits of the VNNI panels and the decode tiles. Takes G = 32 or a multiple of 64; returns
// n_begin (nothing written) for other groups, K % 64 != 0 or no AMX.
int64_t MatMulQ4DynPanelAmx(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                            const uint8_t* w, const float* scales, const float* offsets,
                            const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                            int64_t n_begin, int64_t n_end);

}  // namespace slm::kernels
