// Quantized matmul kernels (kernels/quant_kernels.h) against their scalar references, on every
// supported SIMD target, on awkward shapes (1 row, odd K/N, K not a multiple of the vector).
//
// Tolerances: the SIMD kernels differ from the double-precision references only by float32
// rounding (dequantization FMA, summation order, the final scaling). The error of a float32 sum
// is bounded by a small multiple of K·2^-24·Σ|terms|, so every check is
// |y - y_ref| <= 1e-5 · Σ_k |x_k · ŵ_k| (+ |bias|), ŵ the dequantized weight. The integer dot
// products of the dynamic kernels are exact, so there only the f32 scaling rounds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_feature.h"
#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q4_split_x.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/quant_kernels.h"
#include "kernel_test_util.h"

namespace slm::kernels {
namespace {

using testing::AllNear;
using testing::RandomFloats;

// The Highway bodies on every target; the VNNI, AVX-VNNI and Arm dot-product bodies have their own
// tests below.
class QuantMatMulTest : public testing::PerTargetTest {
 protected:
  void SetUp() override {
    testing::PerTargetTest::SetUp();
    SetVnniEnabledForTest(false);
    SetAvxVnniEnabledForTest(false);
    SetDotprodEnabledForTest(false);
  }
  void TearDown() override {
    SetVnniEnabledForTest(true);
    SetAvxVnniEnabledForTest(true);
    SetDotprodEnabledForTest(true);
    testing::PerTargetTest::TearDown();
  }
};

struct Q8Weights {
  std::vector<int8_t> w;
  std::vector<float> scales;
};
struct Q4Weights {
  std::vector<uint8_t> w;
  std::vector<float> scales, offsets;
};

Q8Weights RandomQ8(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> s(0.001f, 0.02f);
  Q8Weights r;
  r.w.resize(size_t(N * K));
  for (auto& v : r.w) v = int8_t(q(rng));
  r.scales.resize(size_t(N));
  for (auto& v : r.scales) v = s(rng);
  return r;
}

Q4Weights RandomQ4(int64_t N, int64_t K, int64_t G, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> s(0.001f, 0.05f), o(-0.3f, 0.1f);
  Q4Weights r;
  r.w.resize(size_t(N * K / 2));
  for (auto& v : r.w) v = uint8_t(byte(rng));
  r.scales.resize(size_t(N * K / G));
  for (auto& v : r.scales) v = s(rng);
  r.offsets.resize(r.scales.size());
  for (auto& v : r.offsets) v = o(rng);
  return r;
}

// Σ|x·ŵ| + |b| per output: the scale of the tolerance.
std::vector<float> Magnitude(const std::vector<float>& x, const std::vector<float>& wdeq,
                             const std::vector<float>* bias, int64_t R, int64_t K, int64_t N) {
  std::vector<float> m(size_t(R * N));
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? std::fabs((*bias)[size_t(n)]) : 0.0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(double(x[size_t(r * K + k)]) * wdeq[size_t(n * K + k)]);
      m[size_t(r * N + n)] = float(s);
    }
  }
  return m;
}

::testing::AssertionResult Q8Matches(int64_t R, int64_t K, int64_t N, bool bias, bool dynamic) {
  const uint32_t seed = uint32_t(R * 7919 + K * 131 + N);
  const auto x = RandomFloats(size_t(R * K), seed);
  const auto b = RandomFloats(size_t(N), seed + 1);
  const Q8Weights q = RandomQ8(N, K, seed + 2);
  std::vector<float> wdeq(size_t(N * K));
  for (int64_t n = 0; n < N; ++n) DequantizeRowQ8(q.w.data(), q.scales.data(), K, n, 1.0f, wdeq.data() + n * K);
  std::vector<float> y(size_t(R * N), -1.0f), want(size_t(R * N));
  const float* bp = bias ? b.data() : nullptr;
  std::vector<float> xin = x;
  if (dynamic) {
    std::vector<int8_t> xq(size_t(R * K));
    std::vector<float> xs(static_cast<size_t>(R));
    QuantizeRowsI8(x.data(), xq.data(), xs.data(), nullptr, R, K, 1);
    MatMulQ8DynColumns(xq.data(), xs.data(), q.w.data(), q.scales.data(), bp, y.data(), R, K, N, 0, N);
    reference::MatMulQ8Dyn(xq.data(), xs.data(), q.w.data(), q.scales.data(), bp, want.data(), R, K, N);
    for (int64_t i = 0; i < R * K; ++i) xin[size_t(i)] = float(xq[size_t(i)]) * xs[size_t(i / K)];
  } else {
    MatMulQ8Columns(x.data(), q.w.data(), q.scales.data(), bp, y.data(), R, K, N, 0, N);
    reference::MatMulQ8(x.data(), q.w.data(), q.scales.data(), bp, want.data(), R, K, N);
  }
  const auto mag = Magnitude(xin, wdeq, bias ? &b : nullptr, R, K, N);
  auto res = AllNear(y, want, 1e-5f, 1e-6f, &mag);
  if (!res) res << " [Q8 R=" << R << " K=" << K << " N=" << N << " dynamic=" << dynamic << "]";
  return res;
}

::testing::AssertionResult Q4Matches(int64_t R, int64_t K, int64_t N, int64_t G, bool asym,
                                     bool bias, bool dynamic) {
  const uint32_t seed = uint32_t(R * 7919 + K * 131 + N * 7 + G);
  const auto x = RandomFloats(size_t(R * K), seed);
  const auto b = RandomFloats(size_t(N), seed + 1);
  const Q4Weights q = RandomQ4(N, K, G, seed + 2);
  const float* off = asym ? q.offsets.data() : nullptr;
  std::vector<float> wdeq(size_t(N * K));
  for (int64_t n = 0; n < N; ++n) DequantizeRowQ4(q.w.data(), q.scales.data(), off, K, G, n, 1.0f, wdeq.data() + n * K);
  std::vector<float> y(size_t(R * N), -1.0f), want(size_t(R * N));
  const float* bp = bias ? b.data() : nullptr;
  std::vector<float> xin = x;
  if (dynamic) {
    std::vector<int8_t> xq(size_t(R * K));
    std::vector<float> xs(static_cast<size_t>(R));
    std::vector<int32_t> gs(size_t(R * K / G));
    QuantizeRowsI8(x.data(), xq.data(), xs.data(), gs.data(), R, K, G);
    MatMulQ4DynColumns(xq.data(), xs.data(), gs.data(), q.w.data(), q.scales.data(), off, bp, y.data(), R, K, N, G, 0, N);
    reference::MatMulQ4Dyn(xq.data(), xs.data(), gs.data(), q.w.data(), q.scales.data(), off, bp, want.data(), R, K, N, G);
    for (int64_t i = 0; i < R * K; ++i) xin[size_t(i)] = float(xq[size_t(i)]) * xs[size_t(i / K)];
  } else {
    MatMulQ4Columns(x.data(), q.w.data(), q.scales.data(), off, bp, y.data(), R, K, N, G, 0, N);
    reference::MatMulQ4(x.data(), q.w.data(), q.scales.data(), off, bp, want.data(), R, K, N, G);
  }
  const auto mag = Magnitude(xin, wdeq, bias ? &b : nullptr, R, K, N);
  auto res = AllNear(y, want, 1e-5f, 1e-6f, &mag);
  if (!res) res << " [Q4 R=" << R << " K=" << K << " N=" << N << " G=" << G << " asym=" << asym << " dynamic=" << dynamic << "]";
  return res;
}

TEST_P(QuantMatMulTest, Int8WeightOnlyMatchesReferenceOnAwkwardShapes) {
  for (int64_t R : {1, 2, 3, 4, 5, 9}) {
    for (int64_t K : {1, 3, 17, 31, 64, 65, 130, 257}) {
      for (int64_t N : {1, 3, 7, 17, 33}) ASSERT_TRUE(Q8Matches(R, K, N, (R + K + N) % 2 == 0, false));
    }
  }
}

TEST_P(QuantMatMulTest, Int8DynamicActivationMatchesReferenceOnAwkwardShapes) {
  for (int64_t R : {1, 2, 3, 4, 5, 9}) {
    for (int64_t K : {1, 3, 17, 31, 64, 65, 130, 257}) {
      for (int64_t N : {1, 3, 7, 17}) ASSERT_TRUE(Q8Matches(R, K, N, (R + K + N) % 2 == 1, true));
    }
  }
}

TEST_P(QuantMatMulTest, Int4WeightOnlyMatchesReferenceForEveryGroupSize) {
  for (int64_t G : {32, 64, 128}) {
    for (int64_t R : {1, 2, 3, 4, 5, 9}) {
      for (int64_t K : {G, 2 * G, 3 * G}) {
        for (int64_t N : {1, 2, 3, 7, 17}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/N % 2 == 0, (R + N) % 2 == 0, false));
        }
      }
    }
  }
}

TEST_P(QuantMatMulTest, Int4WeightOnlyDecodeMatchesReferenceAcrossChunksAndTails) {
  // Decode-sized R with K spanning whole 128-weight chunks plus tails of 32, 64 and 96 (the
  // AVX-512 nibble-plane kernel's chunks and its scalar tail; the AVX2 one's chunks are 64
  // weights, so 160, 224, 288 and 1248 leave it a tail of 32), N off their 4-row tiles; G = 256:
  // one scale for several chunks.
  for (int64_t G : {32, 64, 128, 256}) {
    for (int64_t K : {128, 160, 224, 256, 288, 640, 768, 1152 + 96}) {
      if (K % G != 0) continue;
      for (int64_t R : {1, 2, 3}) {
        for (int64_t N : {1, 3, 4, 5, 9, 13}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/(N + K / 32) % 2 == 0, (R + N) % 2 == 0, false));
        }
      }
    }
  }
}

// max over n of |y[n] − reference| / Σ_k |x_k·ŵ[n,k]| for one x row of a weight-only int4 decode
// product: product(x, w, scales, offsets, y, K, N, G) computes y[0, N).
template <typename Product>
double Int4DecodeWorstRelativeError(Product&& product, const std::vector<float>& x, int64_t K, int64_t N, int64_t G,
                                    bool asym) {
  const Q4Weights q = RandomQ4(N, K, G, 7);
  const float* off = asym ? q.offsets.data() : nullptr;
  std::vector<float> wdeq(static_cast<size_t>(N * K)), y(static_cast<size_t>(N)), want(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) DequantizeRowQ4(q.w.data(), q.scales.data(), off, K, G, n, 1.0f, wdeq.data() + n * K);
  product(x.data(), q.w.data(), q.scales.data(), off, y.data(), K, N, G);
  reference::MatMulQ4(x.data(), q.w.data(), q.scales.data(), off, nullptr, want.data(), 1, K, N, G);
  const auto mag = Magnitude(x, wdeq, nullptr, 1, K, N);
  double worst = 0;
  for (int64_t n = 0; n < N; ++n) worst = std::max(worst, std::fabs(double(y[size_t(n)]) - want[size_t(n)]) / mag[size_t(n)]);
  return worst;
}

// The same through the dispatch (the Highway bodies here: the AVX-512 and AVX2 nibble-plane
// kernels where they apply, else the generic tile).
double Int4DecodeWorstRelativeError(const std::vector<float>& x, int64_t K, int64_t N, int64_t G, bool asym) {
  return Int4DecodeWorstRelativeError(
      [](const float* xs, const uint8_t* w, const float* scales, const float* off, float* y, int64_t k, int64_t n, int64_t g) {
        MatMulQ4Columns(xs, w, scales, off, nullptr, y, 1, k, n, g, 0, n);
      },
      x, K, N, G, asym);
}

// The decode product through the dispatch within uniform_bound / outlier_bound of Σ|x·ŵ|, on
// uniform x and x with a few channels 300x the rest (as LLM hidden states have), symmetric and
// asymmetric groups of 32 and 128; the measured errors printed as `[ TAG ]` lines when tag is set.
void ExpectInt4DecodePrecision(double uniform_bound, double outlier_bound, const char* tag) {
  for (int64_t K : {2048, 4096 + 32}) {
    std::vector<float> outliers = RandomFloats(size_t(K), uint32_t(K + 1));
    for (int64_t i = 0; i < K / 100; ++i) outliers[size_t((i * 977) % K)] *= 300.0f;
    for (int64_t G : {32, 128}) {
      if (K % G != 0) continue;
      for (bool asym : {false, true}) {
        const double uniform = Int4DecodeWorstRelativeError(RandomFloats(size_t(K), uint32_t(K)), K, 16, G, asym);
        const double spiky = Int4DecodeWorstRelativeError(outliers, K, 16, G, asym);
        if (tag) {
          std::printf("[ %s ] K %ld G %ld asym %d: uniform %.3g, outliers %.3g\n", tag, long(K), long(G), int(asym),
                      uniform, spiky);
        }
        EXPECT_LE(uniform, uniform_bound) << "K " << K << " G " << G << " asym " << asym;
        EXPECT_LE(spiky, outlier_bound) << "outliers, K " << K << " G " << G << " asym " << asym;
      }
    }
  }
}

TEST_P(QuantMatMulTest, Int4WeightOnlyDecodeKeepsF32Precision) {
  // The weight-only contract: the product of x with the dequantized weights, to f32 summation
  // order. Uniform x and x with a few channels 300x the rest (as LLM hidden states have),
  // symmetric and asymmetric groups of 32 and 128.
  ExpectInt4DecodePrecision(1e-6, 1e-6, nullptr);
}

// A NaN or an infinity in x makes every output of a decode-sized int4 product non-finite, as the
// f32 product would.
void ExpectANonFiniteXMakesEveryInt4OutputNonFinite() {
  const int64_t K = 256, N = 5, G = 32;
  const Q4Weights q = RandomQ4(N, K, G, 11);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> xb = RandomFloats(size_t(K), 6), y(static_cast<size_t>(N));
    xb[77] = bad;
    MatMulQ4Columns(xb.data(), q.w.data(), q.scales.data(), nullptr, nullptr, y.data(), 1, K, N, G, 0, N);
    for (int64_t n = 0; n < N; ++n) EXPECT_FALSE(std::isfinite(y[size_t(n)])) << "x[77] = " << bad << ", n " << n;
  }
}

// The 16-bit x tile of the int4 decode (matmul_q4_x16-inl.h): x86 AVX2 only, and only switched
// on (SetInt4DecodeX16); each test below turns it on for its own duration.
bool RoundsXTo16Bits(int64_t target) { return HWY_ARCH_X86 && target == HWY_AVX2; }

class Int4DecodeX16On {
 public:
  Int4DecodeX16On() : was_(Int4DecodeX16Enabled()) { SetInt4DecodeX16(true); }
  ~Int4DecodeX16On() { SetInt4DecodeX16(was_); }

 private:
  bool was_;
};

// Per value k of the whole 64-value chunks: its lane, the 8 values that share one 16-bit scale in
// the tile — byte B = k % 16 of block k / 32 carries value k, bytes 4i..4i+3 make lane i.
int64_t X16Lane(int64_t k) { return 8 * (k / 64) + 4 * ((k % 64) / 32) + (k % 16) / 4; }

// x as the tile rounds it, written independently of it: per lane s = max|x| · (1/32767) (f32),
// x̂ = s · clamp(round-to-nearest-even(x / s), ±32767); values past the whole chunks stay.
std::vector<float> RoundedLikeTheX16Tile(const std::vector<float>& x) {
  const int64_t K = int64_t(x.size()), whole = K / 64 * 64;
  std::vector<float> lane_max(size_t(whole / 8), 0.0f), out = x;
  for (int64_t k = 0; k < whole; ++k) lane_max[size_t(X16Lane(k))] = std::max(lane_max[size_t(X16Lane(k))], std::fabs(x[size_t(k)]));
  for (int64_t k = 0; k < whole; ++k) {
    const float s = lane_max[size_t(X16Lane(k))] * (1.0f / 32767.0f);
    const float h = s > 0 ? std::clamp(std::nearbyint(x[size_t(k)] / s), -32767.0f, 32767.0f) : 0.0f;
    out[size_t(k)] = h * s;
  }
  return out;
}

TEST_P(QuantMatMulTest, Int4DecodeX16IsOffUnlessSwitchedOn) {
  if (SwitchedOnInEnvironment("SLM_INT4_X16")) GTEST_SKIP() << "SLM_INT4_X16 is set";
  EXPECT_FALSE(Int4DecodeX16Enabled());
  {
    Int4DecodeX16On on;
    EXPECT_TRUE(Int4DecodeX16Enabled());
  }
  EXPECT_FALSE(Int4DecodeX16Enabled());
}

TEST_P(QuantMatMulTest, Int4DecodeX16IsTheF32ProductWithXRoundedTo16Bits) {
  if (!RoundsXTo16Bits(GetParam())) GTEST_SKIP() << "no 16-bit x tile on this target";
  Int4DecodeX16On on;
  // y = Σ ŵ·x̂ to f32 summation order, x̂ as RoundedLikeTheX16Tile rounds it; and against f32 x,
  // within what that rounding can move: Σ |ŵ_k| · s_lane(k) / 2. Uniform x, outliers, zero /
  // tiny / huge blocks in one row, whole chunks with and without a tail, G 32 / 64 / 128.
  for (int64_t K : {64, 256, 2048, 4096 + 32}) {
    std::vector<float> uniform = RandomFloats(size_t(K), uint32_t(K + 3)), spiky = uniform, mixed = uniform;
    for (int64_t i = 0; i < std::max<int64_t>(K / 100, 1); ++i) spiky[size_t((i * 977) % K)] *= 300.0f;
    for (int64_t k = 0; k < K; ++k) mixed[size_t(k)] *= k % 96 < 32 ? 0.0f : k % 96 < 64 ? 1e-36f : 1e30f;
    for (int64_t G : {32, 64, 128}) {
      if (K % G != 0) continue;
      for (bool asym : {false, true}) {
        const int64_t N = 13;
        const Q4Weights q = RandomQ4(N, K, G, uint32_t(K + G));
        const float* off = asym ? q.offsets.data() : nullptr;
        std::vector<float> wdeq(static_cast<size_t>(N * K));
        for (int64_t n = 0; n < N; ++n) DequantizeRowQ4(q.w.data(), q.scales.data(), off, K, G, n, 1.0f, wdeq.data() + n * K);
        for (const auto* x : {&uniform, &spiky, &mixed}) {
          const std::vector<float> xr = RoundedLikeTheX16Tile(*x);
          std::vector<float> y(static_cast<size_t>(N)), want(static_cast<size_t>(N)), rounded(static_cast<size_t>(N));
          MatMulQ4Columns(x->data(), q.w.data(), q.scales.data(), off, nullptr, y.data(), 1, K, N, G, 0, N);
          reference::MatMulQ4(x->data(), q.w.data(), q.scales.data(), off, nullptr, want.data(), 1, K, N, G);
          reference::MatMulQ4(xr.data(), q.w.data(), q.scales.data(), off, nullptr, rounded.data(), 1, K, N, G);
          const auto mag = Magnitude(xr, wdeq, nullptr, 1, K, N);
          std::vector<float> lane_max(static_cast<size_t>(K / 8 + 1), 0.0f);
          for (int64_t k = 0; k < K / 64 * 64; ++k) lane_max[size_t(X16Lane(k))] = std::max(lane_max[size_t(X16Lane(k))], std::fabs((*x)[size_t(k)]));
          for (int64_t n = 0; n < N; ++n) {
            double moved = 0, half_steps = 0;  // Σ |ŵ_k·(x̂_k − x_k)| ≤ Σ |ŵ_k| · s_lane(k) / 2
            for (int64_t k = 0; k < K / 64 * 64; ++k) {
              moved += std::fabs(double(wdeq[size_t(n * K + k)]) * (xr[size_t(k)] - (*x)[size_t(k)]));
              half_steps += std::fabs(wdeq[size_t(n * K + k)]) * lane_max[size_t(X16Lane(k))] / 32767.0 / 2 * (1 + 1e-6);
            }
            const std::string at = "K " + std::to_string(K) + " G " + std::to_string(G) + " asym " + std::to_string(asym) +
                                   (x == &uniform ? " uniform" : x == &spiky ? " outliers" : " zero/tiny/huge") + " n " + std::to_string(n);
            EXPECT_LE(moved, half_steps) << at;  // the test's own rounding keeps its bound
            EXPECT_LE(std::fabs(double(y[size_t(n)]) - rounded[size_t(n)]), 1e-6 * mag[size_t(n)]) << at;
            EXPECT_LE(std::fabs(double(y[size_t(n)]) - want[size_t(n)]), half_steps + 1e-6 * mag[size_t(n)]) << at;
          }
        }
      }
    }
  }
  ExpectANonFiniteXMakesEveryInt4OutputNonFinite();
}

TEST_P(QuantMatMulTest, Int4DecodeX16KeepsItsStatedPrecision) {
  if (!RoundsXTo16Bits(GetParam())) GTEST_SKIP() << "no 16-bit x tile on this target";
  Int4DecodeX16On on;
  // Against the f32 product (Int4WeightOnlyDecodeKeepsF32Precision's cases): measured ~0.7–1.2e-6
  // of Σ|x·ŵ| on uniform x and ~0.7–1.7e-5 next to outliers (`[ X16 ]` lines), bounded at 3e-6 and
  // 4e-5 — where the f32 tiles stay within 1e-6.
  ExpectInt4DecodePrecision(3e-6, 4e-5, "X16");
}

TEST_P(QuantMatMulTest, Int4DecodeX16MatchesReferenceAcrossChunksTailsAndRows) {
  if (!RoundsXTo16Bits(GetParam())) GTEST_SKIP() << "no 16-bit x tile on this target";
  Int4DecodeX16On on;
  // The shapes of Int4WeightOnlyDecodeMatchesReferenceAcrossChunksAndTails (R 1–3, tails of 32,
  // N off the 4-row tiles, G 32 to 256) within the 1e-5 of Σ|x·ŵ| every Highway product keeps.
  for (int64_t G : {32, 64, 128, 256}) {
    for (int64_t K : {64, 128, 160, 224, 256, 288, 640, 768, 1152 + 96, 2048 + 32}) {
      if (K % G != 0) continue;
      for (int64_t R : {1, 2, 3}) {
        for (int64_t N : {1, 3, 4, 5, 9, 13, 37}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/(N + K / 32) % 2 == 0, (R + N) % 2 == 0, false));
        }
      }
    }
  }
}

TEST_P(QuantMatMulTest, Int4WeightOnlyDecodeTakesZeroTinyHugeAndNonFiniteXAsF32Does) {
  const int64_t K = 256, N = 5, G = 32;
  const Q4Weights q = RandomQ4(N, K, G, 11);
  // All-zero blocks, values near the float minimum and huge values share a row; a row of only
  // tiny values keeps its precision (no scaling of x that would flush it to zero).
  std::vector<float> x = RandomFloats(size_t(K), 5);
  for (int64_t k = 0; k < 32; ++k) x[size_t(k)] = 0.0f;
  for (int64_t k = 32; k < 64; ++k) x[size_t(k)] *= 1e-38f;
  for (int64_t k = 64; k < 96; ++k) x[size_t(k)] *= 1e30f;
  std::vector<float> tiny = RandomFloats(size_t(K), 8);
  for (float& v : tiny) v *= 1e-33f;
  for (const auto* xs : {&x, &tiny}) {
    for (const float* off : {static_cast<const float*>(nullptr), q.offsets.data()}) {
      std::vector<float> y(static_cast<size_t>(N)), want(static_cast<size_t>(N));
      MatMulQ4Columns(xs->data(), q.w.data(), q.scales.data(), off, nullptr, y.data(), 1, K, N, G, 0, N);
      reference::MatMulQ4(xs->data(), q.w.data(), q.scales.data(), off, nullptr, want.data(), 1, K, N, G);
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_NEAR(y[size_t(n)], want[size_t(n)], 1e-5 * std::fabs(want[size_t(n)]))
            << (xs == &tiny ? "tiny" : "mixed") << " asym " << (off != nullptr) << " n " << n;
      }
    }
  }
  ExpectANonFiniteXMakesEveryInt4OutputNonFinite();
}

// Prefill-sized R for the dynamic products (the Highway tiles take 4 rows at a time): R around
// 8, 16 and 32 (the f32 panel widths on SSE4 / NEON, AVX2 and AVX-512 that an exact int8 panel
// would take over from), a partial last block of rows, and N off the tiles.
TEST_P(QuantMatMulTest, DynamicActivationPrefillRowsMatchReferenceAcrossPanelSizes) {
  for (int64_t R : {7, 8, 15, 16, 17, 31, 32, 33, 64, 70}) {
    for (int64_t K : {64, 96, 257}) {
      for (int64_t N : {1, 5, 13, 14, 29}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
    }
    for (int64_t G : {32, 64}) {
      for (int64_t K : {G, 3 * G}) {
        for (int64_t N : {1, 5, 13, 14, 29}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/(R + N) % 2 == 1, N % 3 == 0, true));
        }
      }
    }
  }
}

// The product of all R rows at once against each row alone (the decode path): the same bits, or
// a failure naming the shape and row. The dynamic schemes need it: the next layer re-quantizes
// its input, so any rounding difference between prefill and decode would flip int8 codes.
::testing::AssertionResult RowsEqualTheOneRowPath(bool int4, int64_t R, int64_t K, int64_t N, int64_t G, bool asym,
                                                  bool with_bias) {
  const auto x = RandomFloats(size_t(R * K), uint32_t(R * 31 + K + N + G));
  const auto b = RandomFloats(size_t(N), uint32_t(N));
  const float* bias = with_bias ? b.data() : nullptr;
  std::vector<int8_t> xq(size_t(R * K));
  std::vector<int32_t> gs(size_t(R * K / G));
  std::vector<float> xs(static_cast<size_t>(R)), y(static_cast<size_t>(R * N)), row(static_cast<size_t>(N));
  QuantizeRowsI8(x.data(), xq.data(), xs.data(), int4 ? gs.data() : nullptr, R, K, G);
  const Q8Weights q8 = int4 ? Q8Weights{} : RandomQ8(N, K, uint32_t(K + 3));
  const Q4Weights q4 = int4 ? RandomQ4(N, K, G, uint32_t(K + 7)) : Q4Weights{};
  const float* off = asym ? q4.offsets.data() : nullptr;
  const auto run = [&](int64_t r0, int64_t rows, float* out) {
    if (int4) {
      MatMulQ4DynColumns(xq.data() + r0 * K, xs.data() + r0, gs.data() + r0 * (K / G), q4.w.data(), q4.scales.data(),
                         off, bias, out, rows, K, N, G, 0, N);
    } else {
      MatMulQ8DynColumns(xq.data() + r0 * K, xs.data() + r0, q8.w.data(), q8.scales.data(), bias, out, rows, K, N, 0, N);
    }
  };
  run(0, R, y.data());
  for (int64_t r = 0; r < R; ++r) {
    run(r, 1, row.data());
    if (std::memcmp(row.data(), y.data() + r * N, row.size() * sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << (int4 ? "8da4w" : "8da8w") << " G=" << G << " R=" << R << " K=" << K
                                           << " N=" << N << " asym=" << asym << " bias=" << with_bias << ": row " << r
                                           << " differs from the one-row path";
    }
  }
  return ::testing::AssertionSuccess();
}

// 8da8w prefill rows (the exact int16 panel from 2 vectors of rows on, matmul_dyn_panel-inl.h)
// give the one-row decode path's bits.
TEST_P(QuantMatMulTest, Int8DynamicActivationPrefillRowsEqualTheOneRowPathBitForBit) {
  for (int64_t R : {8, 16, 17, 32, 33, 70}) {
    for (int64_t K : {63, 64, 520}) {
      for (int64_t N : {1, 7, 13, 30}) ASSERT_TRUE(RowsEqualTheOneRowPath(false, R, K, N, 1, false, true));
    }
  }
}

// The same for 8da4w: the int16 panel (from 2 vectors of rows), the 4-row tiles and the decode
// path's 4-column tiles all form each output in the order of quant_kernels.h (symmetric and
// asymmetric groups, with and without bias).
TEST_P(QuantMatMulTest, Int4DynamicActivationPrefillRowsEqualTheOneRowPathBitForBit) {
  for (int64_t G : {32, 64, 128}) {
    for (int64_t R : {5, 8, 16, 17, 33, 70}) {
      for (int64_t K : {G, 3 * G, 640 / G * G}) {
        for (int64_t N : {1, 6, 13, 30}) ASSERT_TRUE(RowsEqualTheOneRowPath(true, R, K, N, G, (R + N) % 2 == 1, N % 3 != 0));
      }
    }
  }
}

// One row of 8da4w decode over columns [0, split) and [split, N) against the same x row taken 4
// times (the 4-row tiles, which the prefill rows run): the same bits in every column. On AVX2 the
// decode row runs the vpmaddubsw tile (matmul_q4_dyn256-inl.h), whose blocks of 4·spread weight
// rows (spread = 4096 / row bytes, at most 16) are tiles of rows `spread` apart.
::testing::AssertionResult DecodeRowEqualsTheFourRowTiles(const std::vector<int8_t>& xq_row, const Q4Weights& q,
                                                          int64_t K, int64_t N, int64_t G, int64_t split, bool asym,
                                                          bool with_bias) {
  const auto b = RandomFloats(size_t(N), uint32_t(N + 1));
  const float* bias = with_bias ? b.data() : nullptr;
  const float* off = asym ? q.offsets.data() : nullptr;
  std::vector<int8_t> xq4;
  for (int r = 0; r < 4; ++r) xq4.insert(xq4.end(), xq_row.begin(), xq_row.end());
  std::vector<int32_t> gs4(size_t(4 * K / G));
  for (int64_t i = 0; i < 4 * K / G; ++i) {
    for (int64_t k = 0; k < G; ++k) gs4[size_t(i)] += xq4[size_t(i * G + k)];
  }
  const std::vector<float> xs4(4, 0.0123f);
  std::vector<float> y4(static_cast<size_t>(4 * N)), y(static_cast<size_t>(N));
  MatMulQ4DynColumns(xq4.data(), xs4.data(), gs4.data(), q.w.data(), q.scales.data(), off, bias, y4.data(), 4, K, N, G, 0, N);
  for (const auto& [n0, n1] : {std::pair{int64_t{0}, split}, std::pair{split, N}}) {
    MatMulQ4DynColumns(xq4.data(), xs4.data(), gs4.data(), q.w.data(), q.scales.data(), off, bias, y.data(), 1, K, N, G, n0, n1);
  }
  for (int64_t n = 0; n < N; ++n) {
    if (std::memcmp(&y[size_t(n)], &y4[size_t(n)], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "K=" << K << " N=" << N << " G=" << G << " split=" << split << " asym=" << asym
                                           << " bias=" << with_bias << ": column " << n << " is " << y[size_t(n)]
                                           << ", the 4-row tiles give " << y4[size_t(n)];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_P(QuantMatMulTest, Int4DynamicActivationDecodeEqualsTheFourRowTilesAcrossRowBlocksAndColumnRanges) {
  // K 256 / 1024 / 2048 / 8192: spread 16 / 8 / 4 / 1, blocks of 64 / 32 / 16 / 4 rows; N over
  // whole blocks, a part block and single rows; splits off every block boundary.
  for (int64_t G : {32, 64, 256}) {
    for (int64_t K : {256, 1024, 2048, 8192}) {
      for (int64_t N : {37, 75, 150}) {
        const std::vector<float> x = RandomFloats(size_t(K), uint32_t(K + N + G));
        std::vector<int8_t> xq(static_cast<size_t>(K));
        float xs = 0;
        QuantizeRowsI8(x.data(), xq.data(), &xs, nullptr, 1, K, K);
        const Q4Weights q = RandomQ4(N, K, G, uint32_t(K * 3 + N));
        for (int64_t split : {int64_t{5}, N / 2 + 3}) {
          ASSERT_TRUE(DecodeRowEqualsTheFourRowTiles(xq, q, K, N, G, split, (N + split) % 2 == 1, split % 2 == 0));
        }
      }
      ASSERT_TRUE(Q4Matches(1, K, 75, G, /*asym=*/K % 512 == 0, /*bias=*/true, /*dynamic=*/true));
    }
  }
}

// The int16 sums of the AVX2 decode tile at their bound: codes of 15 times xq of -128 (and of 127)
// everywhere, 4 products per lane summed over 4 lanes (30720, under 2^15); codes of 0 the other
// extreme. A wrap or a saturation would change the exact dots.
TEST_P(QuantMatMulTest, Int4DynamicActivationDecodeIsExactAtTheExtremesOfCodesAndActivations) {
  const int64_t K = 1024, N = 40, G = 32;
  for (int8_t xv : {int8_t{-128}, int8_t{127}}) {
    for (uint8_t byte : {uint8_t{0xFF}, uint8_t{0x00}, uint8_t{0xF0}}) {
      Q4Weights q = RandomQ4(N, K, G, 5);
      std::fill(q.w.begin(), q.w.end(), byte);
      const std::vector<int8_t> xq(size_t(K), xv);
      ASSERT_TRUE(DecodeRowEqualsTheFourRowTiles(xq, q, K, N, G, 17, false, true));
      ASSERT_TRUE(DecodeRowEqualsTheFourRowTiles(xq, q, K, N, G, 17, true, false));
      // And the value: Σ (q − 8)·x per group is known exactly.
      std::vector<int32_t> gs(size_t(K / G), int32_t(G) * xv);
      const float xs = 1.0f;
      std::vector<float> y(static_cast<size_t>(N));
      MatMulQ4DynColumns(xq.data(), &xs, gs.data(), q.w.data(), q.scales.data(), nullptr, nullptr, y.data(), 1, K, N, G, 0, N);
      const int lo = byte & 0xF, hi = byte >> 4;
      const double group_dot = double(G / 2) * ((lo - 8) + (hi - 8)) * xv;
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t g = 0; g < K / G; ++g) want += group_dot * q.scales[size_t(n * (K / G) + g)];
        ASSERT_NEAR(y[size_t(n)], want, 1e-4 * std::fabs(want) + 1e-3) << "x " << int(xv) << " byte " << int(byte) << " n " << n;
      }
    }
  }
}

TEST_P(QuantMatMulTest, Int4DynamicActivationMatchesReferenceForEveryGroupSize) {
  for (int64_t G : {32, 64, 128}) {
    for (int64_t R : {1, 2, 3, 4, 5, 9}) {
      for (int64_t K : {G, 2 * G, 3 * G}) {
        for (int64_t N : {1, 2, 3, 7, 17}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/N % 2 == 1, (R + N) % 2 == 1, true));
        }
      }
    }
  }
}

TEST_P(QuantMatMulTest, WeightOnlyPanelPathMatchesReference) {
  // Prefill-sized R: the dequantized slab goes through the panel GEMM (partial panels, K-blocks,
  // N off the 12/6-row tiles).
  for (int64_t R : {16, 33, 65}) {
    for (int64_t N : {1, 5, 13, 26}) {
      for (int64_t K : {64, 96, 576}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, false));
      for (int64_t G : {32, 64}) {
        ASSERT_TRUE(Q4Matches(R, 9 * G, N, G, /*asym=*/N % 2 == 1, (R + N) % 2 == 1, false));
      }
    }
  }
}

// The decode tiles compute each row alone, whatever rows share a tile: over column ranges that
// cross the blocks of the AVX2 int8 and 8da8w tiles, whose rows under 4 KB are taken one per 4 KB
// page (decode_row_order.h: rows of 256 B, 1, 2 and 8 KB, spread 16, 4, 2 and 1), and those of
// the int4 tiles, every column has the bits of its product taken alone (a one-column range, the
// single-row tile), and the reference's value.
TEST_P(QuantMatMulTest, DecodeGivesEveryColumnItsOneColumnBitsAcrossRowBlocks) {
  enum class Kind { kInt8, kInt4, kInt4X16, k8da8w };
  for (int64_t R : {1, 3}) {
    for (int64_t K : {256, 1024, 2048, 8192}) {
      for (int64_t N : {37, 150}) {
        const Q8Weights q8 = RandomQ8(N, K, uint32_t(K + 1));
        const Q4Weights q4 = RandomQ4(N, 2 * K, 32, uint32_t(K + 2));  // int4 rows of K bytes
        const auto b = RandomFloats(size_t(N), uint32_t(N));
        for (Kind kind : {Kind::kInt8, Kind::kInt4, Kind::kInt4X16, Kind::k8da8w}) {
          const bool int4 = kind == Kind::kInt4 || kind == Kind::kInt4X16;
          const int64_t k = int4 ? 2 * K : K;
          std::optional<Int4DecodeX16On> x16;  // the 16-bit x tile where the target has it
          if (kind == Kind::kInt4X16) x16.emplace();
          const auto x = RandomFloats(size_t(R * k), uint32_t(k + N));
          std::vector<int8_t> xq(static_cast<size_t>(R * k));
          std::vector<float> xs(static_cast<size_t>(R));
          QuantizeRowsI8(x.data(), xq.data(), xs.data(), nullptr, R, k, k);
          const auto run = [&](int64_t n0, int64_t n1, float* y) {
            if (int4) {
              MatMulQ4Columns(x.data(), q4.w.data(), q4.scales.data(), N % 2 ? q4.offsets.data() : nullptr, b.data(), y, R, k,
                              N, 32, n0, n1);
            } else if (kind == Kind::kInt8) {
              MatMulQ8Columns(x.data(), q8.w.data(), q8.scales.data(), b.data(), y, R, k, N, n0, n1);
            } else {
              MatMulQ8DynColumns(xq.data(), xs.data(), q8.w.data(), q8.scales.data(), b.data(), y, R, k, N, n0, n1);
            }
          };
          std::vector<float> whole(static_cast<size_t>(R * N)), alone(static_cast<size_t>(R * N));
          const int64_t split = N / 2 + 3;
          run(0, split, whole.data());
          run(split, N, whole.data());
          for (int64_t n = 0; n < N; ++n) run(n, n + 1, alone.data());
          ASSERT_EQ(0, std::memcmp(whole.data(), alone.data(), whole.size() * sizeof(float)))
              << "kind " << int(kind) << " R " << R << " K " << k << " N " << N;
        }
      }
    }
    ASSERT_TRUE(Q8Matches(R, 1024, 150, true, false));
    ASSERT_TRUE(Q8Matches(R, 1024, 150, true, true));
    ASSERT_TRUE(Q4Matches(R, 2048, 150, 32, true, true, false));
  }
}

// The int8 weight-only decode tile prefetches into L1 where the CPU's L1 holds a tile ahead, else
// into L2 (decode_prefetch.h): the same arithmetic either way, so the same bits, and the
// reference's values. (On a CPU whose L1 is too small both runs take the L2 path; the codegen
// test KernelsCodegen.DecodeTilesKeepTheirPrefetches checks that the L1 variant is built.)
TEST_P(QuantMatMulTest, Int8WeightOnlyDecodeGivesTheSameBitsWhicheverCacheItPrefetchesInto) {
  for (int64_t R : {1, 3}) {
    for (int64_t K : {17, 64, 257, 2048, 8192 + 32}) {
      for (int64_t N : {7, 33}) {
        const auto x = RandomFloats(size_t(R * K), uint32_t(K + N));
        const Q8Weights q = RandomQ8(N, K, uint32_t(R + K));
        std::vector<float> y_l1(size_t(R * N)), y_l2(size_t(R * N));
        MatMulQ8Columns(x.data(), q.w.data(), q.scales.data(), nullptr, y_l1.data(), R, K, N, 0, N);
        SetQ8DecodePrefetchIntoL1EnabledForTest(false);
        MatMulQ8Columns(x.data(), q.w.data(), q.scales.data(), nullptr, y_l2.data(), R, K, N, 0, N);
        const auto both_ways = Q8Matches(R, K, N, /*bias=*/true, false);
        SetQ8DecodePrefetchIntoL1EnabledForTest(true);
        ASSERT_EQ(0, std::memcmp(y_l1.data(), y_l2.data(), y_l1.size() * sizeof(float)))
            << "R=" << R << " K=" << K << " N=" << N;
        ASSERT_TRUE(both_ways);
        ASSERT_TRUE(Q8Matches(R, K, N, /*bias=*/true, false));
      }
    }
  }
}

TEST(DecodePrefetch, IntoL1OnlyWhereTheL1HoldsATileAhead) {
  EXPECT_TRUE(L1HoldsQ8DecodePrefetch(48 * 1024, 12));   // Zen 5, Golden Cove
  EXPECT_TRUE(L1HoldsQ8DecodePrefetch(64 * 1024, 16));
  EXPECT_FALSE(L1HoldsQ8DecodePrefetch(32 * 1024, 8));   // Zen 4, Skylake
  EXPECT_FALSE(L1HoldsQ8DecodePrefetch(48 * 1024, 8));
  EXPECT_FALSE(L1HoldsQ8DecodePrefetch(32 * 1024, 12));
  EXPECT_FALSE(L1HoldsQ8DecodePrefetch(0, 0));           // unknown (sysconf answers 0 or -1)
  EXPECT_FALSE(L1HoldsQ8DecodePrefetch(-1, -1));
}

TEST_P(QuantMatMulTest, ColumnRangeWritesOnlyItsColumns) {
  const int64_t R = 5, K = 64, N = 21;
  const auto x = RandomFloats(size_t(R * K), 3);
  const Q8Weights q8 = RandomQ8(N, K, 4);
  const Q4Weights q4 = RandomQ4(N, K, 32, 5);
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<float> y(size_t(R * N), 7.0f);
    if (variant == 0) MatMulQ8Columns(x.data(), q8.w.data(), q8.scales.data(), nullptr, y.data(), R, K, N, 5, 13);
    else MatMulQ4Columns(x.data(), q4.w.data(), q4.scales.data(), nullptr, nullptr, y.data(), R, K, N, 32, 5, 13);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t n = 0; n < N; ++n) {
        const bool inside = n >= 5 && n < 13;
        EXPECT_EQ(y[size_t(r * N + n)] == 7.0f, !inside) << "variant " << variant << " r " << r << " n " << n;
      }
    }
  }
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(QuantMatMulTest);

// The AVX-512 VNNI bodies (taken by the dispatch for K % 64 == 0 on a VNNI CPU) against the same
// references; their integer dots are exact, so the tolerance is the Highway bodies'.
// The VNNI bodies alone: on a CPU with AMX its panel is switched off here (AmxMatMulTest below).
class VnniMatMulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!VnniAvailable()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU / build";
    SetAmxEnabledForTest(false);
  }
  void TearDown() override { SetAmxEnabledForTest(true); }
};

TEST_F(VnniMatMulTest, Int8DynamicActivationMatchesReferenceOnAwkwardShapes) {
  int8_t xq[64] = {};
  float xs = 0, y = 0, sc = 1;
  int8_t w[64] = {};
  ASSERT_TRUE(MatMulQ8DynColumnsVnni(xq, &xs, w, &sc, nullptr, &y, 1, 64, 1, 0, 1)) << "dispatch would not take VNNI";
  // N: below, at and past the decode tile's 8 weight rows (R < 4) and the 4 of the row tiles.
  for (int64_t R : {1, 2, 3, 4, 5, 7, 17}) {
    for (int64_t K : {64, 128, 192, 1024}) {
      for (int64_t N : {1, 3, 4, 5, 8, 9, 17, 33}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
    }
  }
}

TEST_F(VnniMatMulTest, Int4DynamicActivationMatchesReferenceOnAwkwardShapes) {
  // K: whole 128-k chunks, a 64-k tail alone (64) and after chunks (192, 1088; G = 32, 64).
  for (int64_t G : {32, 64, 128}) {
    for (int64_t R : {1, 2, 3, 4, 5, 7, 17}) {
      for (int64_t K : {64, 128, 192, 1024, 1088}) {
        if (K % G != 0) continue;
        for (int64_t N : {1, 3, 4, 5, 9, 33}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, (R + N) % 2 == 1, (R + K / 64 + N) % 2 == 0, true));
        }
      }
    }
  }
}

// The VNNI tiles (4 rows or 4 weight rows) and panels (from 32 rows; signed operands from 33)
// give every row the one-row decode path's bits: 64-k tails (G = 32, 64), groups spanning chunks
// (G = 256), symmetric and asymmetric groups.
TEST_F(VnniMatMulTest, PrefillRowsEqualTheOneRowPathBitForBit) {
  for (int64_t R : {5, 8, 32, 33, 70}) {
    for (int64_t K : {64, 192, 1024}) {
      for (int64_t N : {1, 6, 13}) ASSERT_TRUE(RowsEqualTheOneRowPath(false, R, K, N, 1, false, N != 6));
    }
    for (int64_t G : {32, 64, 128, 256}) {
      for (int64_t K : {64, 192, 512, 1088}) {
        if (K % G != 0) continue;
        for (int64_t N : {1, 6, 13}) ASSERT_TRUE(RowsEqualTheOneRowPath(true, R, K, N, G, (R + N) % 2 == 1, N != 6));
      }
    }
  }
}

TEST_F(VnniMatMulTest, Int4DynamicActivationRowsOf2KBOrMoreMatchReference) {
  // K >= 4096: the decode tiles take one weight row at a time (with and without a 64-k tail).
  for (int64_t G : {32, 64, 128}) {
    for (int64_t R : {1, 2, 5}) {
      for (int64_t K : {4096, 4160}) {
        if (K % G != 0) continue;
        for (int64_t N : {1, 3, 5}) ASSERT_TRUE(Q4Matches(R, K, N, G, (R + N) % 2 == 1, N % 2 == 0, true));
      }
    }
  }
}

TEST_F(VnniMatMulTest, PanelPathMatchesReferenceFrom32Rows) {
  // From kVnniPanelRows rows the products run as panel GEMMs: partial last panels, N off the
  // 12-row (Q8) and 6-row (Q4) blocks and their tails, every group size, symmetric and not;
  // N = 57: one Q4 walk of 48 weight rows, then a block of 6, 2 and 1.
  for (int64_t R : {kVnniPanelRows, kVnniPanelRows + 1, int64_t{70}}) {
    for (int64_t N : {1, 5, 13, 26, 57}) {
      if (N != 57) {
        for (int64_t K : {64, 576}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
      }
      // K: whole 128-k chunks (4G, 8G) and, for G = 64 and 192, a 64-k tail (3G) — the per-row
      // correction of the signed weights walks the packed row 128 k at a time; G = 192: a chunk
      // straddles two groups. (3·32 = 96 is not a VNNI shape: K % 64 != 0.)
      for (int64_t G : {32, 64, 128, 192}) {
        for (int64_t K : {3 * G, 4 * G, 8 * G}) {
          if (K % 64 != 0) continue;
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/N % 2 == 1, (R + N) % 2 == 1, true));
        }
      }
    }
  }
}

// Threads split the columns: ranges that start and end inside the panels' 48-row walks give
// their columns the bits of the whole product and leave every other column as it was.
::testing::AssertionResult Int4ColumnRangesGiveTheWholeProductsBits() {
  const int64_t R = 70, K = 256, N = 120, G = 32;
  const auto x = RandomFloats(size_t(R * K), 11);
  std::vector<int8_t> xq(size_t(R * K));
  std::vector<float> xs(static_cast<size_t>(R));
  std::vector<int32_t> gs(size_t(R * K / G));
  QuantizeRowsI8(x.data(), xq.data(), xs.data(), gs.data(), R, K, G);
  const Q4Weights q = RandomQ4(N, K, G, 12);
  for (const bool asym : {false, true}) {
    const float* off = asym ? q.offsets.data() : nullptr;
    std::vector<float> whole(size_t(R * N));
    MatMulQ4DynColumns(xq.data(), xs.data(), gs.data(), q.w.data(), q.scales.data(), off, nullptr, whole.data(), R, K, N,
                       G, 0, N);
    for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 50}, {5, 101}, {53, 120}}) {
      std::vector<float> y(size_t(R * N), -7.0f);
      MatMulQ4DynColumns(xq.data(), xs.data(), gs.data(), q.w.data(), q.scales.data(), off, nullptr, y.data(), R, K, N,
                         G, begin, end);
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t n = 0; n < N; ++n) {
          const float want = n >= begin && n < end ? whole[size_t(r * N + n)] : -7.0f;
          if (std::memcmp(&y[size_t(r * N + n)], &want, sizeof(float)) != 0) {
            return ::testing::AssertionFailure() << "asym=" << asym << " columns [" << begin << ", " << end << ") row "
                                                 << r << " column " << n << ": " << y[size_t(r * N + n)] << ", want " << want;
          }
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(VnniMatMulTest, Int4PanelColumnRangesGiveTheWholeProductsBitsAndTouchNoOtherColumn) {
  EXPECT_TRUE(Int4ColumnRangesGiveTheWholeProductsBits());
}

TEST_F(VnniMatMulTest, ShapesItCannotTakeFallBackToHighway) {
  std::vector<int8_t> xq(96, 1), w(96, 1);
  std::vector<uint8_t> w4(48, 0x11);
  float xs = 1, sc = 1, y = 0;
  int32_t gs[3] = {32, 32, 32};
  EXPECT_FALSE(MatMulQ8DynColumnsVnni(xq.data(), &xs, w.data(), &sc, nullptr, &y, 1, 96, 1, 0, 1));
  EXPECT_FALSE(MatMulQ4DynColumnsVnni(xq.data(), &xs, gs, w4.data(), &sc, nullptr, nullptr, &y, 1, 96, 1, 32, 0, 1));
  // Below the panel rows, a group that straddles the decode tiles' 128-k chunks (G = 192).
  std::vector<int8_t> xq192(192, 1);
  std::vector<uint8_t> w192(96, 0x11);
  EXPECT_FALSE(MatMulQ4DynColumnsVnni(xq192.data(), &xs, gs, w192.data(), &sc, nullptr, nullptr, &y, 1, 192, 1, 192, 0, 1));
  ASSERT_TRUE(Q8Matches(3, 96, 5, true, true));
  ASSERT_TRUE(Q4Matches(3, 96, 5, 32, false, true, true));
  ASSERT_TRUE(Q4Matches(3, 384, 5, 192, true, true, true));
}

// The AMX panel of the 8da8w prefill products (from kVnniPanelRows rows, whole blocks of 16
// columns; the columns left go to the VNNI panel), on a CPU with AMX-INT8.
class AmxMatMulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!AmxAvailable()) GTEST_SKIP() << "no AMX-INT8 on this CPU / build (or the OS refused the tile state)";
  }
  void TearDown() override { SetAmxEnabledForTest(true); }
};

struct Q8DynCase {
  std::vector<int8_t> xq;
  std::vector<float> xs, bias;
  Q8Weights q;
};
Q8DynCase RandomQ8DynCase(int64_t R, int64_t K, int64_t N, uint32_t seed) {
  Q8DynCase c;
  const auto x = RandomFloats(size_t(R * K), seed);
  c.xq.resize(size_t(R * K));
  c.xs.resize(size_t(R));
  QuantizeRowsI8(x.data(), c.xq.data(), c.xs.data(), nullptr, R, K, 1);
  c.bias = RandomFloats(size_t(N), seed + 1);
  c.q = RandomQ8(N, K, seed + 2);
  return c;
}

// y over columns [begin, end) of an R×K×N 8da8w product (other columns left at −7), with the AMX
// panel on or off.
std::vector<float> Q8DynColumns(const Q8DynCase& c, int64_t R, int64_t K, int64_t N, bool bias, bool amx,
                                int64_t begin, int64_t end) {
  std::vector<float> y(size_t(R * N), -7.0f);
  SetAmxEnabledForTest(amx);
  MatMulQ8DynColumns(c.xq.data(), c.xs.data(), c.q.w.data(), c.q.scales.data(), bias ? c.bias.data() : nullptr,
                     y.data(), R, K, N, begin, end);
  SetAmxEnabledForTest(true);
  return y;
}

::testing::AssertionResult SameBits(const std::vector<float>& got, const std::vector<float>& want, int64_t N) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "row " << i / size_t(N) << " column " << i % size_t(N) << ": "
                                           << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(AmxMatMulTest, PanelMatchesReferenceAndGivesTheVnniPanelsBits) {
  // R: one panel, partial panels (33, 47, 70); N: one 16-column block, a block and a VNNI tail
  // (17, 31), two blocks (32), blocks of 32 and 16 with and without a tail (48, 50, 100); K: one
  // 64-k step and several (576: K % 128 != 0), 2048 and 8192 as in the 1B model.
  for (int64_t R : {kVnniPanelRows, int64_t{33}, int64_t{47}, int64_t{70}, int64_t{128}}) {
    for (int64_t K : {64, 576, 2048}) {
      for (int64_t N : {16, 17, 31, 32, 48, 50, 100}) {
        const bool bias = (R + N) % 2 == 0;
        ASSERT_TRUE(Q8Matches(R, K, N, bias, true));
        const Q8DynCase c = RandomQ8DynCase(R, K, N, uint32_t(R * 3 + K + N));
        const auto amx = Q8DynColumns(c, R, K, N, bias, true, 0, N);
        const auto vnni = Q8DynColumns(c, R, K, N, bias, false, 0, N);
        ASSERT_TRUE(SameBits(amx, vnni, N)) << "R=" << R << " K=" << K << " N=" << N;
      }
    }
  }
  const Q8DynCase c = RandomQ8DynCase(40, 8192, 48, 5);
  EXPECT_TRUE(SameBits(Q8DynColumns(c, 40, 8192, 48, true, true, 0, 48), Q8DynColumns(c, 40, 8192, 48, true, false, 0, 48), 48));
}

TEST_F(AmxMatMulTest, ColumnRangesGiveTheWholeProductsBitsAndTouchNoOtherColumn) {
  // Threads split the columns: ranges that start inside a 32-column block, end with a 16-column
  // block and a VNNI tail, or hold fewer than 16 columns (VNNI only).
  const int64_t R = 70, K = 256, N = 120;
  const Q8DynCase c = RandomQ8DynCase(R, K, N, 17);
  const auto whole = Q8DynColumns(c, R, K, N, true, true, 0, N);
  for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 56}, {5, 101}, {56, 120}, {100, 113}}) {
    const auto y = Q8DynColumns(c, R, K, N, true, true, begin, end);
    std::vector<float> want(size_t(R * N), -7.0f);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t n = begin; n < end; ++n) want[size_t(r * N + n)] = whole[size_t(r * N + n)];
    }
    ASSERT_TRUE(SameBits(y, want, N)) << "columns [" << begin << ", " << end << ")";
  }
}

TEST_F(AmxMatMulTest, PrefillRowsEqualTheOneRowPathBitForBit) {
  for (int64_t R : {32, 33, 70}) {
    for (int64_t K : {64, 1024}) {
      for (int64_t N : {16, 35}) ASSERT_TRUE(RowsEqualTheOneRowPath(false, R, K, N, 1, false, N == 35));
    }
  }
}

// 8da4w: y over columns [begin, end) with the AMX panel on or off (other columns left at −7).
std::vector<float> Q4DynColumns(const std::vector<int8_t>& xq, const std::vector<float>& xs,
                                const std::vector<int32_t>& gs, const Q4Weights& q, const float* bias, bool asym,
                                int64_t R, int64_t K, int64_t N, int64_t G, bool amx, int64_t begin, int64_t end) {
  std::vector<float> y(size_t(R * N), -7.0f);
  SetAmxEnabledForTest(amx);
  MatMulQ4DynColumns(xq.data(), xs.data(), gs.data(), q.w.data(), q.scales.data(), asym ? q.offsets.data() : nullptr,
                     bias, y.data(), R, K, N, G, begin, end);
  SetAmxEnabledForTest(true);
  return y;
}

TEST_F(AmxMatMulTest, Int4PanelMatchesReferenceAndGivesTheVnniPanelsBits) {
  // G = 32 (32-k tile steps), 64, 128 and 256 (several 64-k steps per group); symmetric and
  // asymmetric groups; N with 32- and 16-column blocks and VNNI tails; partial panels.
  for (int64_t G : {32, 64, 128, 256}) {
    for (int64_t R : {kVnniPanelRows, int64_t{47}, int64_t{70}}) {
      for (int64_t K : {256, 768}) {
        for (int64_t N : {16, 31, 48, 50}) {
          const bool asym = (R + N + G) % 2 == 1, bias = N % 2 == 0;
          ASSERT_TRUE(Q4Matches(R, K, N, G, asym, bias, true));
          const auto x = RandomFloats(size_t(R * K), uint32_t(R + K + N + G));
          std::vector<int8_t> xq(size_t(R * K));
          std::vector<float> xs(static_cast<size_t>(R));
          std::vector<int32_t> gs(size_t(R * K / G));
          QuantizeRowsI8(x.data(), xq.data(), xs.data(), gs.data(), R, K, G);
          const Q4Weights q = RandomQ4(N, K, G, uint32_t(N * 5 + G));
          const auto b = RandomFloats(size_t(N), 3);
          const float* bp = bias ? b.data() : nullptr;
          const auto amx = Q4DynColumns(xq, xs, gs, q, bp, asym, R, K, N, G, true, 0, N);
          const auto vnni = Q4DynColumns(xq, xs, gs, q, bp, asym, R, K, N, G, false, 0, N);
          ASSERT_TRUE(SameBits(amx, vnni, N)) << "G=" << G << " R=" << R << " K=" << K << " N=" << N << " asym=" << asym;
        }
      }
    }
  }
}

TEST_F(AmxMatMulTest, Int4ColumnRangesGiveTheWholeProductsBitsAndTouchNoOtherColumn) {
  EXPECT_TRUE(Int4ColumnRangesGiveTheWholeProductsBits());
}

TEST_F(AmxMatMulTest, Int4PrefillRowsEqualTheOneRowPathBitForBit) {
  for (int64_t G : {32, 128}) {
    for (int64_t R : {32, 33, 70}) {
      for (int64_t N : {16, 35}) ASSERT_TRUE(RowsEqualTheOneRowPath(true, R, 256, N, G, N == 35, R != 33));
    }
  }
}

TEST_F(AmxMatMulTest, Int4PanelTakesGroupsOf32OrWhole64KSteps) {
  std::vector<int8_t> xq(32 * 192, 1);
  std::vector<float> xs(32, 1.0f), sc(32 * 192 / 32, 1.0f), y(32 * 32);
  std::vector<int32_t> gs(32 * 192 / 32, 0);
  std::vector<uint8_t> w(32 * 96, 0x88);
  auto run = [&](int64_t K, int64_t G) {
    return MatMulQ4DynPanelAmx(xq.data(), xs.data(), gs.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 32, K, 32,
                               G, 0, 32);
  };
  EXPECT_EQ(run(192, 32), 32);
  EXPECT_EQ(run(192, 64), 32);
  EXPECT_EQ(run(192, 192), 32);  // 3 tile steps of 64 k per group
  EXPECT_EQ(run(192, 96), 0);    // a group of 1.5 tile steps
  EXPECT_EQ(run(160, 32), 0);    // K % 64 != 0
}

// The AMX panels run inside the VNNI dispatch: switching VNNI off (a test, SLM_DISABLE_VNNI, a
// lower --simd-target) switches them off, and on again with it — whichever was asked first.
TEST_F(AmxMatMulTest, FollowsTheVnniSwitch) {
  SetVnniEnabledForTest(false);
  EXPECT_FALSE(AmxAvailable());
  SetVnniEnabledForTest(true);
  EXPECT_TRUE(AmxAvailable());
}

TEST_F(AmxMatMulTest, PanelTakesWholeBlocksOf16ColumnsAndLeavesTheRest) {
  const Q8DynCase c = RandomQ8DynCase(32, 128, 64, 9);
  std::vector<float> y(32 * 64, 0.0f);
  auto run = [&](int64_t K, int64_t begin, int64_t end) {
    return MatMulQ8DynPanelAmx(c.xq.data(), c.xs.data(), c.q.w.data(), c.q.scales.data(), nullptr, y.data(), 32, K, 64,
                               begin, end);
  };
  EXPECT_EQ(run(128, 0, 64), 64);
  EXPECT_EQ(run(128, 3, 50), 35);   // a block of 32 from 3; the 15 left are too few for one of 16
  EXPECT_EQ(run(128, 10, 25), 10);  // fewer than 16: none
  EXPECT_EQ(run(96, 0, 64), 0);     // K % 64 != 0: none
  SetAmxEnabledForTest(false);
  EXPECT_EQ(run(128, 0, 64), 0);
}

// The AVX-VNNI bodies (decode tiles for R < kAvxVnniMaxRows, panels from kAvxVnniPanelRows, on a
// CPU with AVX-VNNI once AVX-512 VNNI is out of the way) with the Highway AVX2 target for the rows
// in between, as on an AVX-VNNI CPU without AVX-512.
class AvxVnniMatMulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!AvxVnniAvailable()) GTEST_SKIP() << "no AVX-VNNI on this CPU / build";
    ASSERT_TRUE(SelectSimdTarget("AVX2").ok());
  }
  void TearDown() override { ASSERT_TRUE(SelectSimdTarget("best").ok()); }
};

TEST_F(AvxVnniMatMulTest, Int8DynamicActivationMatchesReferenceOnAwkwardShapes) {
  int8_t xq[32] = {};
  float xs = 0, y = 0, sc = 1;
  int8_t w[32] = {};
  ASSERT_TRUE(MatMulQ8DynColumnsAvxVnni(xq, &xs, w, &sc, nullptr, &y, 1, 32, 1, 0, 1)) << "dispatch would not take AVX-VNNI";
  for (int64_t R : {1, 2, 3}) {
    for (int64_t K : {32, 64, 96, 1024, 2080}) {
      for (int64_t N : {1, 3, 4, 5, 8, 9, 17, 33}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
    }
  }
}

TEST_F(AvxVnniMatMulTest, Int4DynamicActivationMatchesReferenceForEveryGroupSize) {
  // N: the 8-, 4- and 1-row tiles and their mixes; G = 256: a group over 4 steps of 64 k.
  for (int64_t G : {32, 64, 128, 256}) {
    for (int64_t R : {1, 2, 3}) {
      for (int64_t K : {64, 128, 192, 1024, 1088}) {
        if (K % G != 0) continue;
        for (int64_t N : {1, 3, 4, 5, 8, 9, 13, 33}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, (R + N) % 2 == 1, (R + K / 64 + N) % 2 == 0, true));
        }
      }
    }
  }
}

TEST_F(AvxVnniMatMulTest, Int4PanelColumnRangesGiveTheWholeProductsBitsAndTouchNoOtherColumn) {
  EXPECT_TRUE(Int4ColumnRangesGiveTheWholeProductsBits());
}

TEST_F(AvxVnniMatMulTest, PanelPathMatchesReferenceFromItsFirstRowCount) {
  // Partial last panels; N off the 6-row blocks and their 2- and 1-row tails; every group size
  // the panel takes (G = 96: not a tile shape); symmetric and not, with and without bias.
  // N = 57: one Q4 walk of 48 weight rows, then a block of 6, 2 and 1.
  for (int64_t R : {kAvxVnniPanelRows, kAvxVnniPanelRows + 1, int64_t{15}, int64_t{70}}) {
    for (int64_t N : {1, 5, 7, 13, 26, 57}) {
      if (N != 57) {
        for (int64_t K : {32, 96, 576}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
      }
      for (int64_t G : {32, 64, 96, 128}) {
        for (int64_t K : {2 * G, 4 * G}) {
          if (K % 64 != 0) continue;
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/N % 2 == 1, (R + N) % 2 == 1, true));
        }
      }
    }
  }
}

// Prefill (the Highway AVX2 tiles below kAvxVnniPanelRows = 8 rows, the AVX-VNNI panels from
// there) and decode (AVX-VNNI tiles) give every row the same bits: the next layer re-quantizes
// its input, so a rounding difference would flip int8 codes.
TEST_F(AvxVnniMatMulTest, PrefillRowsEqualTheOneRowPathBitForBit) {
  for (int64_t R : {4, 5, 7, 8, 12, 16, 17, 33, 70}) {
    for (int64_t K : {32, 64, 192, 1024}) {
      for (int64_t N : {1, 6, 13}) ASSERT_TRUE(RowsEqualTheOneRowPath(false, R, K, N, 1, false, N != 6));
    }
    // G = 96: the panel's group, decoded by the Highway tiles.
    for (int64_t G : {32, 64, 96, 128, 256}) {
      for (int64_t K : {64, 192, 512, 1088}) {
        if (K % G != 0) continue;
        for (int64_t N : {1, 6, 13}) ASSERT_TRUE(RowsEqualTheOneRowPath(true, R, K, N, G, (R + N) % 2 == 1, N != 6));
      }
    }
  }
}

// The int8 weight-only split-x bodies (decode rows: AVX-VNNI, Arm dot product), called directly
// and through the dispatch: x in three int8 parts per lane (4 values on AVX-VNNI, 8 on Arm), so
// the Highway tolerance holds and x keeps near-f32 precision, also next to outliers.
using Q8SplitXFn = bool (*)(const float*, const int8_t*, const float*, const float*, float*, int64_t, int64_t, int64_t,
                            int64_t, int64_t);

void ExpectQ8SplitXMatchesReference(Q8SplitXFn body) {
  std::vector<float> x(32, 1.0f);
  std::vector<int8_t> w(32, 3);
  float sc = 1, y = 0;
  ASSERT_TRUE(body(x.data(), w.data(), &sc, nullptr, &y, 1, 32, 1, 0, 1)) << "dispatch would not take it";
  EXPECT_FALSE(body(x.data(), w.data(), &sc, nullptr, &y, 1, 48, 1, 0, 1));  // K % 32
  EXPECT_FALSE(body(x.data(), w.data(), &sc, nullptr, &y, 4, 32, 1, 0, 1));  // 4 rows
  for (int64_t R : {1, 2, 3}) {
    for (int64_t K : {32, 64, 96, 1024, 2080}) {
      for (int64_t N : {1, 3, 4, 5, 9, 33}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, false));
    }
  }
  ASSERT_TRUE(Q8Matches(2, 48, 5, true, false));  // the Highway tile
}

void ExpectQ8SplitXNearF32Precision(Q8SplitXFn body) {
  // AVX-VNNI measured 1.9e-8 / 7.7e-9 (random x, K 2048 / 8192) and 1.7e-7 / 1.1e-7 (1% of the
  // values ×300) of Σ|x·ŵ|: as the int4 split-x bodies.
  for (int64_t K : {2048, 8192}) {
    for (bool outliers : {false, true}) {
      std::vector<float> x = RandomFloats(size_t(K), uint32_t(K + outliers));
      if (outliers) {
        for (int64_t i = 0; i < K / 100; ++i) x[size_t((i * 977) % K)] *= 300.0f;
      }
      const int64_t N = 16;
      const Q8Weights q = RandomQ8(N, K, 9);
      std::vector<float> wdeq(static_cast<size_t>(N * K)), y(static_cast<size_t>(N)), want(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) DequantizeRowQ8(q.w.data(), q.scales.data(), K, n, 1.0f, wdeq.data() + n * K);
      ASSERT_TRUE(body(x.data(), q.w.data(), q.scales.data(), nullptr, y.data(), 1, K, N, 0, N));
      reference::MatMulQ8(x.data(), q.w.data(), q.scales.data(), nullptr, want.data(), 1, K, N);
      const auto mag = Magnitude(x, wdeq, nullptr, 1, K, N);
      double worst = 0;
      for (int64_t n = 0; n < N; ++n) worst = std::max(worst, std::fabs(double(y[size_t(n)]) - want[size_t(n)]) / mag[size_t(n)]);
      std::printf("[ SPLITX ] int8 K %ld%s: worst |y - ref| / sum|x w| %.3g\n", long(K), outliers ? ", outliers" : "", worst);
      EXPECT_LE(worst, outliers ? 1e-6 : 1e-7) << "K " << K;
    }
  }
}

void ExpectQ8SplitXHandlesZeroTinyAndNonFiniteX(Q8SplitXFn body) {
  const int64_t K = 128, N = 5;
  const Q8Weights q = RandomQ8(N, K, 12);
  std::vector<float> x = RandomFloats(size_t(K), 13);
  for (int64_t k = 0; k < 32; ++k) x[size_t(k)] = 0.0f;
  for (int64_t k = 32; k < 64; ++k) x[size_t(k)] *= 1e-38f;
  for (int64_t k = 64; k < 96; ++k) x[size_t(k)] *= 1e30f;
  std::vector<float> y(static_cast<size_t>(N)), want(static_cast<size_t>(N));
  ASSERT_TRUE(body(x.data(), q.w.data(), q.scales.data(), nullptr, y.data(), 1, K, N, 0, N));
  reference::MatMulQ8(x.data(), q.w.data(), q.scales.data(), nullptr, want.data(), 1, K, N);
  for (int64_t n = 0; n < N; ++n) EXPECT_NEAR(y[size_t(n)], want[size_t(n)], 1e-5 * std::fabs(want[size_t(n)])) << n;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> xb = RandomFloats(size_t(K), 14);
    xb[77] = bad;
    ASSERT_TRUE(body(xb.data(), q.w.data(), q.scales.data(), nullptr, y.data(), 1, K, N, 0, N));
    for (int64_t n = 0; n < N; ++n) EXPECT_FALSE(std::isfinite(y[size_t(n)])) << "x[77] = " << bad << ", n " << n;
  }
}

TEST_F(AvxVnniMatMulTest, Int8WeightOnlyDecodeMatchesReferenceOnAwkwardShapes) {
  ExpectQ8SplitXMatchesReference(MatMulQ8ColumnsSplitXAvxVnni);
}
TEST_F(AvxVnniMatMulTest, Int8WeightOnlySplitXKeepsXNearF32Precision) {
  ExpectQ8SplitXNearF32Precision(MatMulQ8ColumnsSplitXAvxVnni);
}
TEST_F(AvxVnniMatMulTest, Int8WeightOnlyZeroTinyAndNonFiniteValuesOfX) {
  ExpectQ8SplitXHandlesZeroTinyAndNonFiniteX(MatMulQ8ColumnsSplitXAvxVnni);
}

TEST_F(AvxVnniMatMulTest, ShapesItCannotTakeFallBackToHighway) {
  std::vector<int8_t> xq(8 * 96, 1), w(96, 1);
  std::vector<uint8_t> w4(48, 0x11);
  float xs[8] = {1, 1, 1, 1, 1, 1, 1, 1}, sc = 1, y[8] = {};
  int32_t gs[12] = {};
  EXPECT_FALSE(MatMulQ8DynColumnsAvxVnni(xq.data(), xs, w.data(), &sc, nullptr, y, 1, 48, 1, 0, 1));   // K % 32
  EXPECT_FALSE(MatMulQ8DynColumnsAvxVnni(xq.data(), xs, w.data(), &sc, nullptr, y, 4, 64, 1, 0, 1));   // 4 rows
  EXPECT_FALSE(MatMulQ4DynColumnsAvxVnni(xq.data(), xs, gs, w4.data(), &sc, nullptr, nullptr, y, 1, 96, 1, 32, 0, 1));  // K % 64
  EXPECT_FALSE(MatMulQ4DynColumnsAvxVnni(xq.data(), xs, gs, w4.data(), &sc, nullptr, nullptr, y, 4, 64, 1, 32, 0, 1));  // 4 rows
  EXPECT_FALSE(MatMulQ8DynColumnsAvxVnni(xq.data(), xs, w.data(), &sc, nullptr, y, kAvxVnniPanelRows - 1, 64, 1, 0, 1));  // below the panel
  std::vector<int8_t> xq192(192, 1);
  std::vector<uint8_t> w192(96, 0x11);
  EXPECT_FALSE(MatMulQ4DynColumnsAvxVnni(xq192.data(), xs, gs, w192.data(), &sc, nullptr, nullptr, y, 1, 192, 1, 96, 0, 1));  // G = 96
  ASSERT_TRUE(Q8Matches(3, 48, 5, true, true));
  ASSERT_TRUE(Q4Matches(3, 96, 5, 32, false, true, true));
  ASSERT_TRUE(Q4Matches(2, 192, 5, 96, true, true, true));
}

TEST_F(AvxVnniMatMulTest, ColumnRangeWritesOnlyItsColumns) {
  const int64_t K = 128, N = 13, G = 32;
  std::vector<int8_t> xq(size_t(K), 3);
  std::vector<int32_t> gs(size_t(K / G), 3 * G);
  const float xs = 0.5f;
  const Q4Weights q4 = RandomQ4(N, K, G, 5);
  const Q8Weights q8 = RandomQ8(N, K, 6);
  std::vector<float> y(size_t(N), -7.0f);
  ASSERT_TRUE(MatMulQ4DynColumnsAvxVnni(xq.data(), &xs, gs.data(), q4.w.data(), q4.scales.data(), nullptr, nullptr,
                                        y.data(), 1, K, N, G, 3, 12));
  for (int64_t n = 0; n < N; ++n) EXPECT_EQ(y[size_t(n)] == -7.0f, n < 3 || n >= 12) << "Q4 column " << n;
  std::fill(y.begin(), y.end(), -7.0f);
  ASSERT_TRUE(MatMulQ8DynColumnsAvxVnni(xq.data(), &xs, q8.w.data(), q8.scales.data(), nullptr, y.data(), 1, K, N, 2, 11));
  for (int64_t n = 0; n < N; ++n) EXPECT_EQ(y[size_t(n)] == -7.0f, n < 2 || n >= 11) << "Q8 column " << n;
}

// The AVX-512 VNNI body of the weight-only int4 decode product (taken by the dispatch for R < 4
// on a VNNI CPU). x goes in as three int8 parts scaled per 8 values (2^-22 of their largest |x|),
// so the Highway bodies' tolerance holds, and tighter ones (SplitXKeeps...).
// The Arm dot-product decode bodies (aarch64 CPUs with `sdot`; here under qemu), on the best
// Highway target for the prefill rows.
class DotprodMatMulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DotprodAvailable()) GTEST_SKIP() << "no Arm dot product on this CPU / build";
  }
};

TEST_F(DotprodMatMulTest, Int8DynamicActivationMatchesReferenceOnAwkwardShapes) {
  int8_t xq[16] = {}, w[16] = {};
  float xs = 0, y = 0, sc = 1;
  ASSERT_TRUE(MatMulQ8DynColumnsDotprod(xq, &xs, w, &sc, nullptr, &y, 1, 16, 1, 0, 1)) << "dispatch would not take it";
  EXPECT_FALSE(MatMulQ8DynColumnsDotprod(xq, &xs, w, &sc, nullptr, &y, 1, 8, 1, 0, 1));  // K % 16
  for (int64_t R : {1, 2, 3}) {
    for (int64_t K : {16, 48, 64, 1040}) {
      for (int64_t N : {1, 3, 4, 5, 9, 33}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
    }
  }
}

TEST_F(DotprodMatMulTest, Int4DynamicActivationMatchesReferenceForEveryGroupSize) {
  for (int64_t G : {32, 64, 96, 128}) {
    for (int64_t R : {1, 2, 3}) {
      for (int64_t K : {G, 2 * G, 6 * G}) {
        for (int64_t N : {1, 3, 4, 5, 9}) ASSERT_TRUE(Q4Matches(R, K, N, G, (R + N) % 2 == 1, (R + N) % 3 == 0, true));
      }
    }
  }
}

// Runs `check` on the panel GEMMs' `smmla` tiles (where the CPU has the int8 matrix multiply)
// and on their `sdot` tiles; the name of the one that failed goes into the failure.
template <class Check>
void ForEachPanelBody(Check&& check) {
  for (bool i8mm : {true, false}) {
    if (i8mm && !I8mmAvailable()) continue;
    SetI8mmEnabledForTest(i8mm);
    SCOPED_TRACE(i8mm ? "smmla tiles" : "sdot tiles");
    check();
    SetI8mmEnabledForTest(true);
  }
}

TEST_F(DotprodMatMulTest, I8mmFollowsTheDotProductSwitch) {
  if (!I8mmAvailable()) GTEST_SKIP() << "no int8 matrix multiply on this CPU / build";
  SetDotprodEnabledForTest(false);
  EXPECT_FALSE(I8mmAvailable());
  SetDotprodEnabledForTest(true);
  SetI8mmEnabledForTest(false);
  EXPECT_FALSE(I8mmAvailable());
  EXPECT_TRUE(DotprodAvailable());
  SetI8mmEnabledForTest(true);
}

// From kDotprodMaxRows rows the panel GEMMs (matmul_q_dotprod_panel.cc): rows off its tiles of
// 8 (Q8) and 4 (Q4) activation rows (odd rows off the smmla row pairs), columns off its blocks of
// 8 weight rows.
TEST_F(DotprodMatMulTest, PanelMatchesReferenceOnAwkwardShapes) {
  ForEachPanelBody([] {
  for (int64_t R : {4, 5, 8, 11, 33}) {
    for (int64_t K : {16, 48, 1040}) {
      for (int64_t N : {1, 7, 8, 9, 21}) ASSERT_TRUE(Q8Matches(R, K, N, (R + N) % 2 == 0, true));
    }
    for (int64_t G : {32, 64, 96, 128}) {
      for (int64_t K : {G, 3 * G}) {
        for (int64_t N : {1, 7, 8, 9, 21}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, (R + N) % 2 == 1, (R + N) % 3 == 0, true));
          ASSERT_TRUE(Q4Matches(R, K, N, G, (R + N) % 2 == 0, (R + N) % 3 == 1, true));
        }
      }
    }
  }
  });
}

TEST_F(DotprodMatMulTest, PanelColumnRangeWritesOnlyItsColumns) {
  ForEachPanelBody([] {
  const int64_t R = 5, K = 128, N = 21, G = 32;
  std::vector<int8_t> xq(size_t(R * K), 3);
  std::vector<int32_t> gs(size_t(R * K / G), 3 * G);
  std::vector<float> xs(size_t(R), 0.5f);
  const Q4Weights q4 = RandomQ4(N, K, G, 5);
  const Q8Weights q8 = RandomQ8(N, K, 6);
  std::vector<float> y(size_t(R * N), -7.0f);
  ASSERT_TRUE(MatMulQ4DynColumnsDotprod(xq.data(), xs.data(), gs.data(), q4.w.data(), q4.scales.data(), nullptr,
                                        nullptr, y.data(), R, K, N, G, 3, 12));
  for (int64_t i = 0; i < R * N; ++i) EXPECT_EQ(y[size_t(i)] == -7.0f, i % N < 3 || i % N >= 12) << "Q4 output " << i;
  std::fill(y.begin(), y.end(), -7.0f);
  ASSERT_TRUE(MatMulQ8DynColumnsDotprod(xq.data(), xs.data(), q8.w.data(), q8.scales.data(), nullptr, y.data(), R, K,
                                        N, 2, 19));
  for (int64_t i = 0; i < R * N; ++i) EXPECT_EQ(y[size_t(i)] == -7.0f, i % N < 2 || i % N >= 19) << "Q8 output " << i;
  });
}

// Prefill rows (the panel GEMMs) give the decode rows' bits.
TEST_F(DotprodMatMulTest, PrefillRowsEqualTheOneRowPathBitForBit) {
  ForEachPanelBody([] {
  for (int64_t R : {4, 8, 17, 33}) {
    for (int64_t K : {16, 64, 528}) {
      for (int64_t N : {1, 6, 13}) ASSERT_TRUE(RowsEqualTheOneRowPath(false, R, K, N, 1, false, N != 6));
    }
    for (int64_t G : {32, 64, 96, 128}) {
      for (int64_t K : {G, 3 * G, 8 * G}) {
        for (int64_t N : {1, 6, 13}) ASSERT_TRUE(RowsEqualTheOneRowPath(true, R, K, N, G, (R + N) % 2 == 1, N != 6));
      }
    }
  }
  });
}

TEST_F(DotprodMatMulTest, Int8WeightOnlyDecodeMatchesReferenceOnAwkwardShapes) {
  ExpectQ8SplitXMatchesReference(MatMulQ8ColumnsSplitXDotprod);
}
TEST_F(DotprodMatMulTest, Int8WeightOnlySplitXKeepsXNearF32Precision) {
  ExpectQ8SplitXNearF32Precision(MatMulQ8ColumnsSplitXDotprod);
}
TEST_F(DotprodMatMulTest, Int8WeightOnlyZeroTinyAndNonFiniteValuesOfX) {
  ExpectQ8SplitXHandlesZeroTinyAndNonFiniteX(MatMulQ8ColumnsSplitXDotprod);
}

// Run for the three bodies of the kernel: AVX-512 VNNI, (with the AVX2 target, as on an AVX-VNNI
// CPU without AVX-512) AVX-VNNI and the Arm dot product, each called directly by SplitX() and
// through the dispatch by Q4Matches.
enum class SplitXBody { kAvx512Vnni, kAvxVnni, kDotprod };

class SplitXMatMulTest : public ::testing::TestWithParam<SplitXBody> {
 protected:
  void SetUp() override {
    if (GetParam() == SplitXBody::kAvx512Vnni) {
      if (!VnniAvailable()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU / build";
    } else if (GetParam() == SplitXBody::kDotprod) {
      if (!DotprodAvailable()) GTEST_SKIP() << "no Arm dot product on this CPU / build";
    } else {
      if (!AvxVnniAvailable()) GTEST_SKIP() << "no AVX-VNNI on this CPU / build";
      ASSERT_TRUE(SelectSimdTarget("AVX2").ok());
    }
  }
  void TearDown() override { ASSERT_TRUE(SelectSimdTarget("best").ok()); }
};

bool SplitX(SplitXBody body, const float* x, const uint8_t* w, const float* scales, const float* offsets,
            const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G, int64_t n_begin, int64_t n_end) {
  switch (body) {
    case SplitXBody::kAvx512Vnni: return MatMulQ4ColumnsSplitX(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    case SplitXBody::kAvxVnni: return MatMulQ4ColumnsSplitXAvxVnni(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    case SplitXBody::kDotprod: return MatMulQ4ColumnsSplitXDotprod(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
  }
  return false;
}

// Int4DecodeWorstRelativeError of one split-x body called directly (symmetric groups).
double WorstRelativeError(SplitXBody body, const std::vector<float>& x, int64_t K, int64_t N, int64_t G) {
  return Int4DecodeWorstRelativeError(
      [body](const float* xs, const uint8_t* w, const float* scales, const float* off, float* y, int64_t k, int64_t n,
             int64_t g) { EXPECT_TRUE(SplitX(body, xs, w, scales, off, nullptr, y, 1, k, n, g, 0, n)); },
      x, K, N, G, /*asym=*/false);
}

TEST_P(SplitXMatMulTest, Int4WeightOnlyDecodeMatchesReferenceAcrossChunksAndTails) {
  std::vector<float> x(128, 1.0f), sc(4, 1.0f);
  std::vector<uint8_t> w(64, 0x88);
  float y = 0;
  ASSERT_TRUE(SplitX(GetParam(), x.data(), w.data(), sc.data(), nullptr, nullptr, &y, 1, 128, 1, 32, 0, 1))
      << "dispatch would not take the body";
  // K: whole 128-weight chunks, tails of 32, 64 and 96 after them, rows of 2 KB and more; G = 256:
  // one scale for two chunks. N off the 16-, 8- and 4-row tiles.
  for (int64_t G : {32, 64, 128, 256}) {
    for (int64_t K : {128, 160, 224, 256, 288, 640, 1152 + 96, 4096 + 32}) {
      if (K % G != 0) continue;
      for (int64_t R : {1, 2, 3}) {
        for (int64_t N : {1, 3, 4, 5, 9, 13, 31}) {
          ASSERT_TRUE(Q4Matches(R, K, N, G, /*asym=*/(N + K / 32) % 2 == 0, (R + N) % 2 == 0, false));
        }
      }
    }
  }
}

TEST_P(SplitXMatMulTest, SplitXKeepsXNearF32Precision) {
  // Measured 1.7e-8 (K 2048) and 1.2e-8 (K 4128) of Σ|x·ŵ|: the order of f32 summation.
  for (int64_t K : {2048, 4096 + 32}) {
    const double e = WorstRelativeError(GetParam(), RandomFloats(size_t(K), uint32_t(K)), K, 16, 32);
    std::printf("[ SPLITX ] K %ld: worst |y - ref| / sum|x w| %.3g\n", long(K), e);
    EXPECT_LE(e, 1e-7) << "K " << K;
  }
}

TEST_P(SplitXMatMulTest, SplitXKeepsItsPrecisionNextToOutliers) {
  // Activations with a few channels 300× the rest (as LLM hidden states have): the parts are
  // scaled per 8 values, so an outlier costs only its lane mates precision. Measured 4.1e-7
  // (K 2048) and 1.1e-7 (K 8192); in an experiment with one scale per row of x the error was
  // ~20× larger (matmul_q4_split_x.cc).
  for (int64_t K : {2048, 8192}) {
    std::vector<float> x = RandomFloats(size_t(K), uint32_t(K + 1));
    for (int64_t i = 0; i < K / 100; ++i) x[size_t((i * 977) % K)] *= 300.0f;
    const double e = WorstRelativeError(GetParam(), x, K, 64, 32);
    std::printf("[ SPLITX ] K %ld, outliers: worst |y - ref| / sum|x w| %.3g\n", long(K), e);
    EXPECT_LE(e, 1e-6) << "K " << K;
  }
}

TEST_P(SplitXMatMulTest, ZeroTinyAndNonFiniteValuesOfX) {
  const int64_t K = 256, N = 4, G = 32;
  const Q4Weights q = RandomQ4(N, K, G, 11);
  // All-zero blocks, values near the float minimum (127 / max would overflow) and huge values
  // share a row: each lane has its own scale.
  std::vector<float> x = RandomFloats(size_t(K), 5);
  for (int64_t k = 0; k < 32; ++k) x[size_t(k)] = 0.0f;
  for (int64_t k = 32; k < 64; ++k) x[size_t(k)] *= 1e-38f;
  for (int64_t k = 64; k < 96; ++k) x[size_t(k)] *= 1e30f;
  std::vector<float> y(static_cast<size_t>(N)), want(static_cast<size_t>(N));
  ASSERT_TRUE(SplitX(GetParam(), x.data(), q.w.data(), q.scales.data(), q.offsets.data(), nullptr, y.data(), 1, K, N, G, 0, N));
  reference::MatMulQ4(x.data(), q.w.data(), q.scales.data(), q.offsets.data(), nullptr, want.data(), 1, K, N, G);
  for (int64_t n = 0; n < N; ++n) EXPECT_NEAR(y[size_t(n)], want[size_t(n)], 1e-5 * std::fabs(want[size_t(n)])) << n;
  // A NaN or an infinity in x makes every output NaN / non-finite, as the f32 product would.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> xb = RandomFloats(size_t(K), 6);
    xb[77] = bad;
    ASSERT_TRUE(SplitX(GetParam(), xb.data(), q.w.data(), q.scales.data(), nullptr, nullptr, y.data(), 1, K, N, G, 0, N));
    for (int64_t n = 0; n < N; ++n) EXPECT_FALSE(std::isfinite(y[size_t(n)])) << "x[77] = " << bad << ", n " << n;
  }
}

TEST_P(SplitXMatMulTest, ColumnRangeWritesOnlyItsColumns) {
  const int64_t R = 2, K = 256, N = 21;
  const auto x = RandomFloats(size_t(R * K), 3);
  const Q4Weights q4 = RandomQ4(N, K, 32, 5);
  std::vector<float> y(size_t(R * N), 7.0f);
  ASSERT_TRUE(SplitX(GetParam(), x.data(), q4.w.data(), q4.scales.data(), q4.offsets.data(), nullptr, y.data(), R, K, N, 32, 5, 14));
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(y[size_t(r * N + n)] == 7.0f, !(n >= 5 && n < 14)) << "r " << r << " n " << n;
  }
}

TEST_P(SplitXMatMulTest, ShapesItCannotTakeFallBackToHighway) {
  if (GetParam() == SplitXBody::kDotprod) {  // blocks of 32 weights: every K and G the layout allows
    std::vector<float> x(4 * 128, 1.0f), sc(16, 1.0f), y(4, 0.0f);
    std::vector<uint8_t> w(64, 0x11);
    EXPECT_FALSE(SplitX(GetParam(), x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 4, 128, 1, 32, 0, 1));  // 4 rows
    ASSERT_TRUE(Q4Matches(4, 96, 5, 32, false, true, false));
    return;
  }
  if (GetParam() == SplitXBody::kAvxVnni) {  // steps of 64 weights: 32-weight tails with G = 32
    std::vector<float> x(4 * 192, 1.0f), sc(8, 1.0f), y(4, 0.0f);
    std::vector<uint8_t> w(4 * 96, 0x11);
    EXPECT_FALSE(SplitX(GetParam(), x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 4, 128, 1, 32, 0, 1));  // 4 rows
    EXPECT_FALSE(SplitX(GetParam(), x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 1, 32, 1, 32, 0, 1));   // K < 64
    EXPECT_FALSE(SplitX(GetParam(), x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 1, 192, 1, 96, 0, 1));  // G = 96
    ASSERT_TRUE(Q4Matches(3, 32, 5, 32, false, true, false));
    ASSERT_TRUE(Q4Matches(1, 192, 5, 96, true, true, false));
    return;
  }
  std::vector<float> x(4 * 192, 1.0f), sc(8, 1.0f), y(4, 0.0f);
  std::vector<uint8_t> w(4 * 96, 0x11);
  // 4 rows of x (the slab path), K below one chunk, a group that straddles a chunk (G = 192).
  EXPECT_FALSE(MatMulQ4ColumnsSplitX(x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 4, 128, 1, 32, 0, 1));
  EXPECT_FALSE(MatMulQ4ColumnsSplitX(x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 1, 96, 1, 32, 0, 1));
  EXPECT_FALSE(MatMulQ4ColumnsSplitX(x.data(), w.data(), sc.data(), nullptr, nullptr, y.data(), 1, 192, 1, 192, 0, 1));
  ASSERT_TRUE(Q4Matches(3, 96, 5, 32, false, true, false));
  ASSERT_TRUE(Q4Matches(1, 384, 5, 192, true, true, false));
}

INSTANTIATE_TEST_SUITE_P(Bodies, SplitXMatMulTest,
                         ::testing::Values(SplitXBody::kAvx512Vnni, SplitXBody::kAvxVnni, SplitXBody::kDotprod),
                         [](const ::testing::TestParamInfo<SplitXBody>& i) {
                           return i.param == SplitXBody::kAvx512Vnni ? "Avx512Vnni"
                                  : i.param == SplitXBody::kAvxVnni  ? "AvxVnni"
                                                                     : "Dotprod";
                         });

// The SIMD activation quantizer equals the scalar reference bit for bit: same scale, same codes
// (ties to even), same group sums, on every target and on K not a multiple of the vector.
TEST_P(QuantMatMulTest, QuantizeRowsI8EqualsTheReferenceExactly) {
  for (auto [R, K, G] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {1, 7, 7}, {3, 17, 17}, {2, 32, 32},
                         {5, 100, 25}, {4, 2048, 32}, {1, 4099, 4099}, {7, 96, 32}, {3, 256, 64},
                         {2, 640, 128}, {3, 48, 16}}) {
    std::vector<float> x = RandomFloats(size_t(R * K), uint32_t(R * 1000 + K));
    // Exact ties after scaling: a row whose max is 127 makes inv = 1, so k + 0.5 values tie.
    for (int64_t k = 0; k < K; ++k) x[size_t(k)] = k == 0 ? 127.0f : float(k % 50) - 24.5f;
    if (R > 2) std::fill(x.begin() + K, x.begin() + 2 * K, 0.0f);  // an all-zero row
    std::vector<int8_t> q(size_t(R * K)), q_ref(size_t(R * K));
    std::vector<float> s(static_cast<size_t>(R)), s_ref(static_cast<size_t>(R));
    std::vector<int32_t> g(size_t(R * (K / G))), g_ref(size_t(R * (K / G)));
    QuantizeRowsI8(x.data(), q.data(), s.data(), g.data(), R, K, G);
    reference::QuantizeRowsI8(x.data(), q_ref.data(), s_ref.data(), g_ref.data(), R, K, G);
    EXPECT_EQ(q, q_ref) << "R=" << R << " K=" << K;
    EXPECT_EQ(s, s_ref) << "R=" << R << " K=" << K;
    EXPECT_EQ(g, g_ref) << "R=" << R << " K=" << K;
  }
}

TEST(QuantizeRowsI8Test, RoundsToNearestAndKeepsGroupSums) {
  const std::vector<float> x = {1.0f, -0.5f, 0.25f, 0.0f, 2.0f, -2.0f, 0.01f, 1.0f};
  std::vector<int8_t> xq(8);
  std::vector<float> xs(2);
  std::vector<int32_t> gs(4);
  QuantizeRowsI8(x.data(), xq.data(), xs.data(), gs.data(), 2, 4, 2);
  EXPECT_FLOAT_EQ(xs[0], 1.0f / 127.0f);
  EXPECT_EQ(xq[0], 127);
  EXPECT_EQ(xq[1], -64);  // -63.5 rounds to even
  EXPECT_EQ(xq[2], 32);   // 31.75
  EXPECT_EQ(gs[0], 127 - 64);
  EXPECT_EQ(gs[1], 32);
  EXPECT_EQ(xq[4], 127);
  EXPECT_EQ(xq[5], -127);
  EXPECT_EQ(gs[3], 1 + 64);  // 0.635 → 1, 63.5 → 64
}

TEST(QuantizeRowsI8Test, AllZeroRowGetsZeroScaleAndZeros) {
  const std::vector<float> x(6, 0.0f);
  std::vector<int8_t> xq(6, 5);
  std::vector<float> xs(1, 9.0f);
  QuantizeRowsI8(x.data(), xq.data(), xs.data(), nullptr, 1, 6, 1);
  EXPECT_EQ(xs[0], 0.0f);
  for (int8_t v : xq) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace slm::kernels
