// AVX-512 BF16 version of the weight-only int4 decode product (matmul_q4_bf16.cc), used by
// MatMulQ4Columns' dispatch when the CPU has avx512bf16. Same contract as MatMulQ4Columns for
// R < kQ4Bf16MaxRows rows of x; returns false (and writes nothing) when it cannot run: no
// AVX-512 BF16 on this CPU or in this build, R too large, K below one 128-weight chunk, or a
// group that neither divides 128 nor is a multiple of it.
#pragma once

#include <cstdint>

namespace slm::kernels {

// Rows of x from which MatMulQ4Columns switches to its dequantize-then-f32 bodies.
constexpr int64_t kQ4Bf16MaxRows = 4;

// True when the CPU has AVX-512 BF16 and SLM_DISABLE_BF16 is unset (or "0"); read once.
bool Bf16Available();
// Tests: false routes the dispatch to the Highway bodies even on a BF16 CPU.
void SetBf16EnabledForTest(bool enabled);

bool MatMulQ4ColumnsBf16(const float* x, const uint8_t* w, const float* scales,
                         const float* offsets, const float* bias, float* y, int64_t R, int64_t K,
                         int64_t N, int64_t G, int64_t n_begin, int64_t n_end);

}  // namespace slm::kernels
