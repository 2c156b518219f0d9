// Arm dot-product (ARMv8.2 `sdot`) bodies of the dynamic-activation products, used by
// quant_kernels' dispatch ahead of the Highway bodies on aarch64 CPUs that have the instruction
// (every Cortex-A55/A75 and later core, Apple M1 and later): one-row tiles for decode
// (R < kDotprodMaxRows, matmul_q_dotprod.cc), panel GEMMs from kDotprodMaxRows rows
// (matmul_q_dotprod_panel.cc). Same contracts as MatMulQ8DynColumns / MatMulQ4DynColumns; each
// returns false (and writes nothing) when it cannot run: not aarch64, no dot product on this
// CPU, SLM_DISABLE_DOTPROD set, K not a multiple of 16 (Q8) / 32 (Q4), or G not a multiple of
// 32.
#pragma once

#include <cstdint>

namespace slm::kernels {

constexpr int64_t kDotprodMaxRows = 4;

// True on an aarch64 CPU with the dot-product instructions (HWCAP_ASIMDDP) unless
// SLM_DISABLE_DOTPROD is set (to anything but "" or "0"); read once.
bool DotprodAvailable();
// Tests and `--simd-target`: false routes the dispatch to the Highway bodies.
void SetDotprodEnabledForTest(bool enabled);

// True when DotprodAvailable() and the CPU has the int8 matrix multiply (`smmla`, HWCAP2_I8MM)
// unless SLM_DISABLE_I8MM is set: the prefill panels then run on `smmla` (twice `sdot`'s products
// per instruction). Tests: false keeps them on `sdot`.
bool I8mmAvailable();
void SetI8mmEnabledForTest(bool enabled);

// Roofline probe: `iters` rounds of 12 independent `sdot` chains in registers; returns the int8
// OPs done (2 per product), 0 when the dot product is not available.
double DotprodDotLoop(int64_t iters, int32_t* sink);
// The same with `smmla` (2×8 by 8×2 products each); 0 when I8mmAvailable() is false.
double I8mmDotLoop(int64_t iters, int32_t* sink);

bool MatMulQ8DynColumnsDotprod(const int8_t* xq, const float* xscale, const int8_t* w,
                               const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                               int64_t N, int64_t n_begin, int64_t n_end);

bool MatMulQ4DynColumnsDotprod(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                               int64_t n_begin, int64_t n_end);

// The panel GEMMs, called by the two functions above for R >= kDotprodMaxRows once they have
// checked the CPU, K and G.
void MatMulQ8DynPanelDotprod(const int8_t* xq, const float* xscale, const int8_t* w, const float* scales,
                             const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin,
                             int64_t n_end);
void MatMulQ4DynPanelDotprod(const int8_t* xq, const float* xscale, const int32_t* group_sums, const uint8_t* w,
                             const float* scales, const float* offsets, const float* bias, float* y, int64_t R,
                             int64_t K, int64_t N, int64_t G, int64_t n_begin, int64_t n_end);

}  // namespace slm::kernels
