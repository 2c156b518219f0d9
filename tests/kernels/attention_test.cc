// Attention (dispatched SIMD) against reference::Attention on every target, and the property
// that hidden (-inf) columns cost nothing: they are never read and never scored.
//
// Tolerance: |out - ref| <= 1e-5·max|v| + 1e-5·|ref|. The outputs are convex combinations of v
// rows, so max|v| bounds their size; the float32 dot products and p·v sums stay far below that.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "kernels/visible_runs.h"
#include "attention_test_util.h"
#include "kernel_test_util.h"

namespace slm::kernels {
namespace {

using testing::AllNear;
using testing::AttentionShape;
using testing::kInf;

struct Inputs {
  AttentionShape s;
  testing::AttentionRows rows;  // q, k, v, k_cache, v_cache
  std::vector<float> mask;
};

// Random rows and mask (attention_test_util.h), row 0 fully hidden when `empty_row0`.
Inputs MakeInputs(AttentionShape s, uint32_t seed, double hidden, bool empty_row0) {
  return {s, testing::RandomAttentionRows(s, seed),
          testing::RandomAttentionMask(s, seed + 5, hidden, empty_row0)};
}

std::vector<float> RunAttention(const Inputs& in, float scale, float softcap, bool use_reference) {
  const AttentionShape& s = in.s;
  const testing::AttentionRows& r = in.rows;
  std::vector<float> out(size_t(s.T * s.Hq * s.hd), NAN);
  std::vector<float> scratch(size_t(AttentionScratchFloats(s.L, s.T, s.Hq, s.Hkv, s.hd)));
  auto fn = use_reference ? &reference::Attention : &Attention;
  fn(r.q.data(), r.k.data(), r.v.data(), r.k_cache.data(), r.v_cache.data(), in.mask.data(),
     out.data(), scratch.data(), s.T, s.L, s.Hq, s.Hkv, s.hd, scale, softcap);
  return out;
}

class AttentionTest : public testing::PerTargetTest {};

TEST_P(AttentionTest, MatchesReference) {
  const AttentionShape shapes[] = {
      {1, 0, 1, 1, 1},    {1, 1, 1, 1, 3},    {1, 7, 4, 1, 16},  {3, 5, 4, 2, 17},
      {8, 64, 4, 2, 32},  {1, 64, 6, 2, 33},  {5, 31, 2, 2, 64}, {4, 17, 8, 2, 65},
      {2, 33, 4, 4, 128}, {1, 129, 2, 1, 256}, {16, 0, 4, 1, 16}, {7, 3, 3, 1, 7},
      // Calls of kAttentionKeyBlockRows rows or more score from transposed key blocks (where the
      // target's lanes divide head_dim: 20 only on 4-lane targets, 7 nowhere).
      {20, 9, 8, 2, 64},  {33, 40, 6, 3, 32}, {17, 0, 4, 4, 128}, {40, 100, 4, 1, 48},
      {18, 5, 2, 2, 20},  {16, 3, 3, 1, 7},
  };
  testing::ForEachAttentionCase(shapes, 100, [](const testing::AttentionCase& c) {
    const Inputs in = MakeInputs(c.shape, c.seed, c.hidden, c.empty_row0);
    const auto got = RunAttention(in, c.scale, c.softcap, false);
    const auto want = RunAttention(in, c.scale, c.softcap, true);
    const float vmax = testing::MaxAbs({&in.rows.v, &in.rows.v_cache});
    ASSERT_TRUE(AllNear(got, want, 1e-5f, 1e-5f * vmax)) << c;
  });
}

TEST_P(AttentionTest, HiddenColumnsAreNeverReadOrScored) {
  // Decode over a 2048-slot cache that holds 9 committed tokens, plus the new token.
  const AttentionShape s{1, 2048, 4, 2, 64};
  Inputs in = MakeInputs(s, 7, 0.0, false);
  const int64_t visible_slots = 9;
  for (int64_t c = 0; c < s.L; ++c) {
    if (c < visible_slots) continue;
    in.mask[size_t(c)] = -kInf;
    for (int64_t g = 0; g < s.Hkv; ++g) {  // poison: any read of a hidden slot yields NaN
      for (int64_t i = 0; i < s.hd; ++i) {
        in.rows.k_cache[size_t((g * s.L + c) * s.hd + i)] = NAN;
        in.rows.v_cache[size_t((g * s.L + c) * s.hd + i)] = NAN;
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

// A chunk's rows get the bits of one-row calls that see the same columns (decode after the chunk's
// earlier rows were committed), whatever the columns' positions and the vectors they fall in:
// head dims that split into whole vectors on every target and ones that do not (48: not on
// AVX-512), 1–8 query heads per kv head, random holes in the masks, soft-capping on and off.
TEST_P(AttentionTest, ChunkRowsEqualOneRowCallsBitForBit) {
  const AttentionShape shapes[] = {
      {16, 0, 2, 2, 16}, {17, 5, 4, 1, 64}, {33, 40, 8, 2, 64},
      {20, 7, 8, 1, 128}, {24, 3, 6, 3, 32}, {19, 31, 4, 4, 48},
      {37, 21, 16, 2, 64}, {18, 9, 3, 1, 20}, {50, 70, 2, 1, 256},
  };
  testing::ForEachAttentionCase(shapes, 300, [](const testing::AttentionCase& c) {
    const AttentionShape& s = c.shape;
    const Inputs in = MakeInputs(s, c.seed, c.hidden, c.empty_row0);
    const auto chunk = RunAttention(in, c.scale, c.softcap, false);
    // One-row calls: a cache of L + T slots holding the cache and the chunk's rows, the new row
    // (anything) hidden.
    const AttentionShape one{1, s.L + s.T, s.Hq, s.Hkv, s.hd};
    Inputs row = MakeInputs(one, c.seed + 1000, 0.0, false);
    for (int64_t g = 0; g < s.Hkv; ++g) {
      for (int64_t c2 = 0; c2 < s.L + s.T; ++c2) {
        for (int64_t i = 0; i < s.hd; ++i) {
          const size_t dst = size_t((g * one.L + c2) * s.hd + i);
          const size_t src = c2 < s.L ? size_t((g * s.L + c2) * s.hd + i) : size_t(((c2 - s.L) * s.Hkv + g) * s.hd + i);
          row.rows.k_cache[dst] = c2 < s.L ? in.rows.k_cache[src] : in.rows.k[src];
          row.rows.v_cache[dst] = c2 < s.L ? in.rows.v_cache[src] : in.rows.v[src];
        }
      }
    }
    for (int64_t t = 0; t < s.T; ++t) {
      std::copy_n(in.rows.q.begin() + t * s.Hq * s.hd, s.Hq * s.hd, row.rows.q.begin());
      std::copy_n(in.mask.begin() + t * (s.L + s.T), s.L + s.T, row.mask.begin());
      row.mask.back() = -kInf;
      const auto got = RunAttention(row, c.scale, c.softcap, false);
      ASSERT_EQ(std::memcmp(got.data(), chunk.data() + t * s.Hq * s.hd, got.size() * sizeof(float)), 0)
          << c << ": row " << t << " differs from its one-row call";
    }
  });
}

// A chunk's keys are scored in blocks of a vector's lanes of columns: the keys of hidden columns
// sharing a block with visible ones are read, but their scores are dropped. Poisoned (NaN) keys
// and values in hidden cache slots change no bit, and only visible columns are counted.
TEST_P(AttentionTest, ChunkHiddenColumnsChangeNoBit) {
  const AttentionShape s{20, 64, 8, 2, 64};
  const int64_t visible_slots = 9;  // slots 9..15 share the first block with visible ones
  Inputs in = MakeInputs(s, 21, 0.0, false);
  for (int64_t t = 0; t < s.T; ++t) {
    for (int64_t c = visible_slots; c < s.L; ++c) in.mask[size_t(t * (s.L + s.T) + c)] = -kInf;
    for (int64_t c = t + 1; c < s.T; ++c) in.mask[size_t(t * (s.L + s.T) + s.L + c)] = -kInf;  // causal
  }
  const auto clean = RunAttention(in, 0.125f, 0.0f, false);
  for (int64_t g = 0; g < s.Hkv; ++g) {
    for (int64_t c = visible_slots; c < s.L; ++c) {
      for (int64_t i = 0; i < s.hd; ++i) {
        in.rows.k_cache[size_t((g * s.L + c) * s.hd + i)] = NAN;
        in.rows.v_cache[size_t((g * s.L + c) * s.hd + i)] = NAN;
      }
    }
  }
  const int64_t before = AttentionScoresComputedForTest();
  const auto poisoned = RunAttention(in, 0.125f, 0.0f, false);
  EXPECT_EQ(AttentionScoresComputedForTest() - before, s.Hq * (s.T * visible_slots + s.T * (s.T + 1) / 2));
  ASSERT_EQ(std::memcmp(clean.data(), poisoned.data(), clean.size() * sizeof(float)), 0);
  const auto want = RunAttention(in, 0.125f, 0.0f, true);
  EXPECT_TRUE(AllNear(poisoned, want, 1e-5f, 1e-5f * testing::MaxAbs({&in.rows.v})));
}

// Heads split at any point (a thread's share, AttentionHeads), also inside a kv group, give the
// bits of the whole call: one-row calls and chunks that score from key blocks.
TEST_P(AttentionTest, HeadRangesGiveTheBitsOfTheWholeCall) {
  const AttentionShape shapes[] = {{1, 30, 6, 2, 32}, {20, 9, 8, 2, 64}, {17, 3, 6, 3, 16}};
  for (const AttentionShape& s : shapes) {
    const Inputs in = MakeInputs(s, 31, 0.3, false);
    const auto whole = RunAttention(in, 0.25f, 0.0f, false);
    const testing::AttentionRows& r = in.rows;
    for (int64_t split = 1; split < s.Hq; ++split) {
      std::vector<float> out(whole.size(), NAN);
      std::vector<float> scratch(size_t(AttentionScratchFloats(s.L, s.T, s.Hq, s.Hkv, s.hd)));
      for (const auto& [hb, he] : {std::pair<int64_t, int64_t>{0, split}, {split, s.Hq}}) {
        AttentionHeads(r.q.data(), r.k.data(), r.v.data(), r.k_cache.data(), r.v_cache.data(), in.mask.data(),
                       out.data(), scratch.data(), s.T, s.L, s.Hq, s.Hkv, s.hd, 0.25f, 0.0f, hb, he);
      }
      ASSERT_EQ(std::memcmp(out.data(), whole.data(), out.size() * sizeof(float)), 0)
          << s << ": heads split at " << split;
    }
  }
}

TEST_P(AttentionTest, RowWithoutVisibleColumnIsZero) {
  const AttentionShape s{2, 4, 2, 1, 8};
  Inputs in = MakeInputs(s, 9, 0.0, /*empty_row0=*/true);
  const auto got = RunAttention(in, 0.5f, 0.0f, false);
  for (int64_t i = 0; i < s.Hq * s.hd; ++i) EXPECT_EQ(got[size_t(i)], 0.0f);
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(AttentionTest);

// The runs that let attention skip hidden columns hold exactly the visible ones, in order: the
// scalar scan, and the vector scan of every target (mask rows whose runs and gaps start and end
// inside vectors, span several, or fill the row).
TEST_P(AttentionTest, VisibleRunsHoldExactlyTheVisibleColumns) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 2, 3, 10, 16, 17, 64, 257, 1536}) {
    for (double p_switch : {0.0, 0.02, 0.3, 0.7, 1.0}) {
      for (bool start_hidden : {false, true}) {
        std::bernoulli_distribution flip(p_switch);
        std::vector<float> mask(static_cast<size_t>(n));
        std::vector<int64_t> want;
        bool hidden = start_hidden;
        for (int64_t j = 0; j < n; ++j) {
          if (flip(rng)) hidden = !hidden;
          mask[size_t(j)] = hidden ? -kInf : (j % 3 == 0 ? 0.0f : -1.5f);  // additive, not only 0
          if (!hidden) want.push_back(j);
        }
        std::vector<int32_t> bounds(size_t(VisibleRuns::BoundsFor(n)), -1), vbounds(bounds);
        const VisibleRuns runs = FindVisibleRuns(mask.data(), n, bounds.data());
        std::vector<int64_t> got;
        for (int64_t r = 0; r < runs.runs(); ++r) {
          ASSERT_LT(runs.begin(r), runs.end(r));
          if (r > 0) {
            ASSERT_LT(runs.end(r - 1), runs.begin(r)) << "runs touch";
          }
          for (int64_t c = runs.begin(r); c < runs.end(r); ++c) got.push_back(c);
        }
        EXPECT_EQ(got, want) << "n=" << n << " p_switch=" << p_switch;
        EXPECT_EQ(runs.count(), int64_t(want.size()));
        const int64_t vruns = FindVisibleRunsForTest(mask.data(), n, vbounds.data());
        EXPECT_EQ(vruns, runs.runs());
        EXPECT_EQ(vbounds, bounds) << "vector scan, n=" << n << " p_switch=" << p_switch;
      }
    }
  }
}

}  // namespace
}  // namespace slm::kernels
