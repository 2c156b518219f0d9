// Arm dot-product (ARMv8.2 `sdot`) bodies of the dynamic-activation products' decode
// (matmul_q_dotprod.cc), used by quant_kernels' dispatch ahead of the Highway bodies on aarch64
// CPUs that have the instruction (every Cortex-A55/A75 and later core, Apple M1 and later).
// Same contracts as MatMulQ8DynColumns / MatMulQ4DynColumns for R < kDotprodMaxRows; each
// returns false (and writes nothing) when it cannot run: not aarch64, no dot product on this
// CPU, SLM_DISABLE_DOTPROD set, R too large, K not a multiple of 16 (Q8) / 32 (Q4), or G not a
// multiple of 32.
#pragma once

#include <cstdint>

namespace slm::kernels {

constexpr int64_t kDotprodMaxRows = 4;

// True on an aarch64 CPU with the dot-product instructions (HWCAP_ASIMDDP) unless
// SLM_DISABLE_DOTPROD is set (to anything but "" or "0"); read once.
bool DotprodAvailable();
// Tests and `--simd-target`: false routes the dispatch to the Highway bodies.
void SetDotprodEnabledForTest(bool enabled);

bool MatMulQ8DynColumnsDotprod(const int8_t* xq, const float* xscale, const int8_t* w,
                               const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                               int64_t N, int64_t n_begin, int64_t n_end);

bool MatMulQ4DynColumnsDotprod(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                               int64_t n_begin, int64_t n_end);

}  // namespace slm::kernels
