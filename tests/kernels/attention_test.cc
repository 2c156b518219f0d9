// Attention (dispatched SIMD) against reference::Attention on every target, and the property
// that hidden (-inf) columns cost nothing: they are never read and never scored.
//
// Tolerance: |out - ref| <= 1e-5·max|v| + 1e-5·|ref|. The outputs are convex combinations of v
// rows, so max|v| bounds their size; the float32 dot products and p·v sums stay far below that.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "kernels/visible_columns.h"
#include "kernel_test_util.h"

namespace slm::kernels {
namespace {

using testing::AllNear;
using testing::RandomFloats;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Shape {
  int64_t T, L, Hq, Hkv, hd;
};

struct Inputs {
  Shape s;
  std::vector<float> q, k, v, k_cache, v_cache, mask;
};

// Random q/k/v and a random mask: each column hidden with probability `hidden`, some visible
// columns carrying a finite additive bias, and row 0 fully hidden when `empty_row0`.
Inputs MakeInputs(Shape s, uint32_t seed, double hidden, bool empty_row0) {
  Inputs in{s, {}, {}, {}, {}, {}, {}};
  const int64_t cols = s.L + s.T;
  in.q = RandomFloats(size_t(s.T * s.Hq * s.hd), seed);
  in.k = RandomFloats(size_t(s.T * s.Hkv * s.hd), seed + 1);
  in.v = RandomFloats(size_t(s.T * s.Hkv * s.hd), seed + 2);
  in.k_cache = RandomFloats(size_t(s.Hkv * s.L * s.hd), seed + 3);
  in.v_cache = RandomFloats(size_t(s.Hkv * s.L * s.hd), seed + 4);
  in.mask.assign(size_t(s.T * cols), 0.0f);
  std::mt19937 rng(seed + 5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (float& m : in.mask) {
    const double r = u(rng);
    m = r < hidden ? -kInf : (r < hidden + 0.1 ? -1.5f : 0.0f);
  }
  if (empty_row0) std::fill(in.mask.begin(), in.mask.begin() + cols, -kInf);
  return in;
}

std::vector<float> RunAttention(const Inputs& in, float scale, float softcap, bool use_reference) {
  const Shape& s = in.s;
  std::vector<float> out(size_t(s.T * s.Hq * s.hd), NAN);
  std::vector<float> scratch(size_t(s.L + s.T));
  auto fn = use_reference ? &reference::Attention : &Attention;
  fn(in.q.data(), in.k.data(), in.v.data(), in.k_cache.data(), in.v_cache.data(), in.mask.data(),
     out.data(), scratch.data(), s.T, s.L, s.Hq, s.Hkv, s.hd, scale, softcap);
  return out;
}

class AttentionTest : public testing::PerTargetTest {};

TEST_P(AttentionTest, MatchesReference) {
  const Shape shapes[] = {
      {1, 0, 1, 1, 1},    {1, 1, 1, 1, 3},    {1, 7, 4, 1, 16},  {3, 5, 4, 2, 17},
      {8, 64, 4, 2, 32},  {1, 64, 6, 2, 33},  {5, 31, 2, 2, 64}, {4, 17, 8, 2, 65},
      {2, 33, 4, 4, 128}, {1, 129, 2, 1, 256}, {16, 0, 4, 1, 16}, {7, 3, 3, 1, 7},
  };
  uint32_t seed = 100;
  for (const Shape& s : shapes) {
    for (double hidden : {0.0, 0.5, 0.95}) {
      for (float softcap : {0.0f, 50.0f}) {
        const Inputs in = MakeInputs(s, seed++, hidden, /*empty_row0=*/hidden > 0.9);
        const float scale = 1.0f / std::sqrt(float(s.hd));
        const auto got = RunAttention(in, scale, softcap, false);
        const auto want = RunAttention(in, scale, softcap, true);
        float vmax = 0.0f;
        for (float x : in.v) vmax = std::max(vmax, std::fabs(x));
        for (float x : in.v_cache) vmax = std::max(vmax, std::fabs(x));
        ASSERT_TRUE(AllNear(got, want, 1e-5f, 1e-5f * vmax))
            << "T=" << s.T << " L=" << s.L << " Hq=" << s.Hq << " Hkv=" << s.Hkv << " hd=" << s.hd
            << " hidden=" << hidden << " softcap=" << softcap;
      }
    }
  }
}

TEST_P(AttentionTest, HiddenColumnsAreNeverReadOrScored) {
  // Decode over a 2048-slot cache that holds 9 committed tokens, plus the new token.
  const Shape s{1, 2048, 4, 2, 64};
  Inputs in = MakeInputs(s, 7, 0.0, false);
  const int64_t visible_slots = 9;
  for (int64_t c = 0; c < s.L; ++c) {
    if (c < visible_slots) continue;
    in.mask[size_t(c)] = -kInf;
    for (int64_t g = 0; g < s.Hkv; ++g) {  // poison: any read of a hidden slot yields NaN
      for (int64_t i = 0; i < s.hd; ++i) {
        in.k_cache[size_t((g * s.L + c) * s.hd + i)] = NAN;
        in.v_cache[size_t((g * s.L + c) * s.hd + i)] = NAN;
      }
    }
  }
  const int64_t before = AttentionScoresComputedForTest();
  const auto got = RunAttention(in, 0.125f, 0.0f, false);
  EXPECT_EQ(AttentionScoresComputedForTest() - before, s.Hq * (visible_slots + 1));
  const auto want = RunAttention(in, 0.125f, 0.0f, true);
  for (float x : got) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(AllNear(got, want, 1e-5f, 1e-5f));

  // The same shape with every column visible scores every column.
  const int64_t before_full = AttentionScoresComputedForTest();
  (void)RunAttention(MakeInputs(s, 7, 0.0, false), 0.125f, 0.0f, false);
  EXPECT_EQ(AttentionScoresComputedForTest() - before_full, s.Hq * (s.L + s.T));
}

TEST_P(AttentionTest, RowWithoutVisibleColumnIsZero) {
  const Shape s{2, 4, 2, 1, 8};
  Inputs in = MakeInputs(s, 9, 0.0, /*empty_row0=*/true);
  const auto got = RunAttention(in, 0.5f, 0.0f, false);
  for (int64_t i = 0; i < s.Hq * s.hd; ++i) EXPECT_EQ(got[size_t(i)], 0.0f);
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(AttentionTest);

// The index that lets attention skip hidden columns visits exactly the visible ones, in order.
TEST(VisibleColumnsTest, WalksExactlyTheVisibleColumns) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 2, 3, 10, 64, 257}) {
    for (double p_hidden : {0.0, 0.3, 0.7, 0.97, 1.0}) {
      std::bernoulli_distribution hide(p_hidden);
      std::vector<float> mask(static_cast<size_t>(n));
      std::vector<float> slots(static_cast<size_t>(n), NAN);
      std::vector<int64_t> want;
      for (int64_t j = 0; j < n; ++j) {
        mask[size_t(j)] = hide(rng) ? -kInf : 0.0f;
        if (mask[size_t(j)] == 0.0f) want.push_back(j);
      }
      const VisibleColumns vis(mask.data(), slots.data(), n);
      std::vector<int64_t> got;
      for (int64_t j = vis.first(); j < vis.end(); j = vis.Next(j)) got.push_back(j);
      EXPECT_EQ(got, want) << "n=" << n << " p_hidden=" << p_hidden;
      EXPECT_EQ(vis.count(), int64_t(want.size()));
      for (int64_t j : want) EXPECT_TRUE(std::isnan(slots[size_t(j)])) << "visible slot written";
    }
  }
}

}  // namespace
}  // namespace slm::kernels
