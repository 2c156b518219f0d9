// The "split-x" bodies of the weight-only decode products (x split into three int8 parts so that
// int8 dot products can take f32 activations): int4 on AVX-512 VNNI (matmul_q4_split_x.cc) and
// on AVX-VNNI, int8 on AVX-VNNI, int4 and int8 on Arm's dot product. The dispatch of MatMulQ4Columns / MatMulQ8Columns tries them
// ahead of the Highway bodies; same contracts for R < kQ4SplitXMaxRows rows of x; each returns
// false (and writes nothing) when it cannot run. MatMulQ4ColumnsSplitX: no AVX-512 VNNI on this
// CPU or in this build (or SLM_DISABLE_VNNI set), R too large, K below one 128-weight chunk, or a
// group that neither divides 128 nor is a multiple of it.
#pragma once

#include <cstdint>

namespace slm::kernels {

// Rows of x from which the weight-only products switch to their dequantize-then-f32 bodies.
constexpr int64_t kQ4SplitXMaxRows = 4;

bool MatMulQ4ColumnsSplitX(const float* x, const uint8_t* w, const float* scales,
                           const float* offsets, const float* bias, float* y, int64_t R, int64_t K,
                           int64_t N, int64_t G, int64_t n_begin, int64_t n_end);

// The same kernel at 256 bits for CPUs with AVX-VNNI (matmul_q4_split_x_avxvnni.cc), the
// dispatch's next choice: false when the CPU lacks AVX-VNNI, the AVX-512 VNNI bodies are in use,
// SLM_DISABLE_VNNI or SLM_DISABLE_AVX_VNNI is set, R is too large, K is below 64, or G is neither
// 32 nor a multiple of 64.
bool MatMulQ4ColumnsSplitXAvxVnni(const float* x, const uint8_t* w, const float* scales,
                                  const float* offsets, const float* bias, float* y, int64_t R, int64_t K,
                                  int64_t N, int64_t G, int64_t n_begin, int64_t n_end);

// The split-x method on int8 weights for AVX-VNNI CPUs (matmul_q8_split_x_avxvnni.cc), taken by
// MatMulQ8Columns ahead of the Highway bodies: same contract as MatMulQ8Columns for
// R < kQ4SplitXMaxRows; false when the CPU lacks AVX-VNNI, the AVX-512 VNNI bodies are in use,
// SLM_DISABLE_VNNI or SLM_DISABLE_AVX_VNNI is set, R is too large or K is not a multiple of 32.
bool MatMulQ8ColumnsSplitXAvxVnni(const float* x, const int8_t* w, const float* scales, const float* bias,
                                  float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end);

// The split-x method on Arm `sdot` (matmul_split_x_dotprod.cc), int4 and int8 weights, tried by
// the dispatch after the x86 bodies: same contracts; false when not on aarch64, the CPU lacks the
// dot product, SLM_DISABLE_DOTPROD is set, R is too large, K is not a multiple of 32 or (int4) G
// is not.
bool MatMulQ4ColumnsSplitXDotprod(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                                  const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                                  int64_t n_begin, int64_t n_end);
bool MatMulQ8ColumnsSplitXDotprod(const float* x, const int8_t* w, const float* scales, const float* bias, float* y,
                                  int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end);

}  // namespace slm::kernels
