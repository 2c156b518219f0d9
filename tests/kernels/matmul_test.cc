// MatMulF32 (dispatched SIMD) against reference::MatMulF32 on awkward shapes, on every target.
//
// Tolerance: |y - y_ref| <= 1e-5 · Σ_k |x_k·w_k| (+|bias|). That sum bounds the rounding error of
// any float32 summation order (error <= ~K·2^-24 of it in the worst case, ~√K·2^-24 typically),
// and unlike |y| it does not shrink when the dot product cancels, so the check cannot flake.
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "kernel_test_util.h"

namespace slm::kernels {
namespace {

using testing::AllNear;
using testing::RandomFloats;

class MatMulTest : public testing::PerTargetTest {};

std::vector<float> Abs(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

::testing::AssertionResult MatMulMatchesReference(int64_t R, int64_t K, int64_t N, bool bias) {
  const uint32_t seed = uint32_t(R * 1000003 + K * 1009 + N);
  const auto x = RandomFloats(size_t(R * K), seed);
  const auto w = RandomFloats(size_t(N * K), seed + 1, 0.1f);
  const auto b = RandomFloats(size_t(N), seed + 2);
  const float* bp = bias ? b.data() : nullptr;
  std::vector<float> y(size_t(R * N)), want(size_t(R * N)), magnitude(size_t(R * N));
  MatMulF32(x.data(), w.data(), bp, y.data(), R, K, N);
  reference::MatMulF32(x.data(), w.data(), bp, want.data(), R, K, N);
  const auto ab = Abs(b);
  reference::MatMulF32(Abs(x).data(), Abs(w).data(), bias ? ab.data() : nullptr,
                       magnitude.data(), R, K, N);
  auto result = AllNear(y, want, 1e-5f, 0.0f, &magnitude);
  if (!result) result << " [R=" << R << " K=" << K << " N=" << N << " bias=" << bias << "]";
  return result;
}

TEST_P(MatMulTest, MatchesReferenceOnAwkwardShapes) {
  for (int64_t R : {1, 2, 3, 4, 5, 31, 32, 33}) {
    for (int64_t K : {1, 3, 7, 15, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257}) {
      for (int64_t N : {1, 3, 7, 9, 17, 33}) {
        ASSERT_TRUE(MatMulMatchesReference(R, K, N, /*bias=*/(R + K + N) % 2 == 0));
      }
    }
  }
}

TEST_P(MatMulTest, PanelPathMatchesReferenceOnAwkwardShapes) {
  // Prefill-sized R takes the panel GEMM (from 2 vectors of rows: 8..32 depending on the
  // target): partial last panels, K across and off the 512-wide K-blocks, N off the 12/6-row
  // tiles and their 2- and 1-row tails.
  for (int64_t R : {8, 16, 17, 32, 48, 65, 100}) {
    for (int64_t K : {1, 7, 33, 257, 512, 600, 1030}) {
      for (int64_t N : {1, 2, 5, 13, 25, 37}) {
        ASSERT_TRUE(MatMulMatchesReference(R, K, N, /*bias=*/(R + K + N) % 2 == 1));
      }
    }
  }
}

TEST_P(MatMulTest, PanelPathColumnRangesReproduceTheFullProduct) {
  const int64_t R = 70, K = 530, N = 41;
  const auto x = RandomFloats(size_t(R * K), 11);
  const auto w = RandomFloats(size_t(N * K), 12, 0.1f);
  const auto b = RandomFloats(size_t(N), 13);
  std::vector<float> full(size_t(R * N)), pieces(size_t(R * N), NAN);
  MatMulF32(x.data(), w.data(), b.data(), full.data(), R, K, N);
  for (auto [nb, ne] : {std::pair<int64_t, int64_t>{0, 13}, {13, 14}, {14, 41}}) {
    MatMulF32Columns(x.data(), w.data(), b.data(), pieces.data(), R, K, N, nb, ne);
  }
  for (size_t i = 0; i < full.size(); ++i) ASSERT_EQ(pieces[i], full[i]) << "i=" << i;
}

TEST_P(MatMulTest, PanelPassesOverRowsKeepEachRowsBits) {
  // At K = 40000 a pass over the weights takes one panel of rows (the transposed x of a pass is
  // bounded in bytes), so R = 70 runs in three passes, the last partial. Each row's outputs are
  // the same bits whichever pass and panel the row lands in.
  const int64_t R = 70, K = 40000, N = 13;
  ASSERT_TRUE(MatMulMatchesReference(R, K, N, /*bias=*/true));
  const auto x = RandomFloats(size_t(R * K), 21);
  const auto w = RandomFloats(size_t(N * K), 22, 0.1f);
  std::vector<float> full(size_t(R * N)), tail(size_t((R - 33) * N));
  MatMulF32(x.data(), w.data(), nullptr, full.data(), R, K, N);
  MatMulF32(x.data() + 33 * K, w.data(), nullptr, tail.data(), R - 33, K, N);
  for (size_t i = 0; i < tail.size(); ++i) ASSERT_EQ(tail[i], full[size_t(33 * N) + i]) << "i=" << i;
}

TEST_P(MatMulTest, MatchesReferenceOnModelSizedShapes) {
  // Decode (R = 1) and prefill-chunk shapes with K and N as in the zoo and real models.
  for (int64_t R : {1, 7, 64, 128}) {
    ASSERT_TRUE(MatMulMatchesReference(R, 2048, 96, true));
    ASSERT_TRUE(MatMulMatchesReference(R, 172, 64, false));  // llama2-zoo down_proj
    ASSERT_TRUE(MatMulMatchesReference(R, 64, 517, false));  // vocab-like N
  }
}

TEST_P(MatMulTest, ColumnRangeWritesOnlyItsColumns) {
  const int64_t R = 3, K = 37, N = 23;
  const auto x = RandomFloats(size_t(R * K), 1);
  const auto w = RandomFloats(size_t(N * K), 2);
  const auto b = RandomFloats(size_t(N), 3);
  std::vector<float> full(size_t(R * N));
  MatMulF32(x.data(), w.data(), b.data(), full.data(), R, K, N);
  // Three ranges that tile [0, N) unevenly reproduce the full product exactly.
  std::vector<float> pieces(size_t(R * N), NAN);
  for (auto [nb, ne] : {std::pair<int64_t, int64_t>{0, 5}, {5, 18}, {18, 23}}) {
    std::vector<float> sentinel = pieces;
    MatMulF32Columns(x.data(), w.data(), b.data(), pieces.data(), R, K, N, nb, ne);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t n = 0; n < N; ++n) {
        const size_t i = size_t(r * N + n);
        if (n >= nb && n < ne) {
          EXPECT_EQ(pieces[i], full[i]) << "r=" << r << " n=" << n;
        } else if (std::isnan(sentinel[i])) {
          EXPECT_TRUE(std::isnan(pieces[i])) << "wrote outside [" << nb << "," << ne << ")";
        }
      }
    }
  }
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(MatMulTest);

}  // namespace
}  // namespace slm::kernels
