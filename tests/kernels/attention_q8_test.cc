// Int8-KV kernels (kernels/attention_q8.h): the SIMD bodies against their scalar references on
// every supported target, and the properties the cache format promises.
//
// Tolerances:
//  - QuantizeKvRows: bit-exact (both sides do the same float32 operations, round-half-even).
//  - AttentionQ8 vs reference: |out - ref| <= 2e-5·max|v̂| + 2e-5·|ref|, v̂ = dequantized
//    values (the outputs are convex combinations of v̂ rows; float32 dot / sum order only).
//  - AttentionQ8 vs f32 Attention over the dequantized rows: the same bound (same math).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/attention_q8.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "attention_test_util.h"
#include "kernel_test_util.h"

namespace slm::kernels {
namespace {

using testing::AllNear;
using testing::AttentionShape;
using testing::kInf;
using testing::RandomFloats;

// Quantized inputs: this call's rows and the caches, each with its per-(row, head) scales.
struct Q8Inputs {
  AttentionShape s;
  std::vector<float> q, mask;
  std::vector<int8_t> k, v, kc, vc;
  std::vector<float> ks, vs, kcs, vcs;
  // The same rows dequantized (q·scale), f32 layouts of kernels.h Attention.
  std::vector<float> k_deq, v_deq, kc_deq, vc_deq;
};

void Quantize(const std::vector<float>& x, int64_t rows, int64_t hd, std::vector<int8_t>& q,
              std::vector<float>& s, std::vector<float>& deq) {
  q.resize(x.size());
  s.resize(size_t(rows));
  reference::QuantizeKvRows(x.data(), q.data(), s.data(), rows, 1, hd);
  deq.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) deq[i] = float(q[i]) * s[i / size_t(hd)];
}

// Random rows (attention_test_util.h; v drawn larger, the v cache smaller, one all-zero cached
// k row, one cached v outlier) and mask, row 0 empty if asked.
Q8Inputs MakeQ8Inputs(AttentionShape s, uint32_t seed, double hidden, bool empty_row0) {
  Q8Inputs in;
  in.s = s;
  testing::AttentionRows r = testing::RandomAttentionRows(s, seed, 2.0f, 0.5f);
  in.q = std::move(r.q);
  if (!r.k_cache.empty()) std::fill(r.k_cache.begin(), r.k_cache.begin() + s.hd, 0.0f);  // scale 0
  if (!r.v_cache.empty()) r.v_cache[0] = 40.0f;                                          // outlier
  Quantize(r.k, s.T * s.Hkv, s.hd, in.k, in.ks, in.k_deq);
  Quantize(r.v, s.T * s.Hkv, s.hd, in.v, in.vs, in.v_deq);
  Quantize(r.k_cache, s.Hkv * s.L, s.hd, in.kc, in.kcs, in.kc_deq);
  Quantize(r.v_cache, s.Hkv * s.L, s.hd, in.vc, in.vcs, in.vc_deq);
  in.mask = testing::RandomAttentionMask(s, seed + 5, hidden, empty_row0);
  return in;
}

enum class Impl { kSimd, kReference, kF32OverDequantized };

std::vector<float> RunQ8(const Q8Inputs& in, float scale, float softcap, Impl impl) {
  const AttentionShape& s = in.s;
  std::vector<float> out(size_t(s.T * s.Hq * s.hd), NAN);
  std::vector<float> scratch(size_t(AttentionScratchFloats(s.L, s.T, s.Hq, s.Hkv, s.hd)));
  if (impl == Impl::kF32OverDequantized) {
    Attention(in.q.data(), in.k_deq.data(), in.v_deq.data(), in.kc_deq.data(), in.vc_deq.data(),
              in.mask.data(), out.data(), scratch.data(), s.T, s.L, s.Hq, s.Hkv, s.hd, scale, softcap);
    return out;
  }
  auto fn = impl == Impl::kReference ? &reference::AttentionQ8 : &AttentionQ8;
  fn(in.q.data(), in.k.data(), in.ks.data(), in.v.data(), in.vs.data(), in.kc.data(), in.kcs.data(),
     in.vc.data(), in.vcs.data(), in.mask.data(), out.data(), scratch.data(), s.T, s.L, s.Hq, s.Hkv,
     s.hd, scale, softcap);
  return out;
}

float MaxAbs(const Q8Inputs& in) { return testing::MaxAbs({&in.v_deq, &in.vc_deq}); }

class AttentionQ8Test : public testing::PerTargetTest {};

TEST_P(AttentionQ8Test, QuantizeKvRowsIsBitExactWithReference) {
  for (int64_t hd : {1, 3, 4, 7, 8, 16, 17, 32, 64, 80, 96, 128, 256}) {
    for (int64_t heads : {1, 3}) {
      const int64_t rows = 5;
      auto x = RandomFloats(size_t(rows * heads * hd), uint32_t(hd * 10 + heads), 3.0f);
      std::fill(x.begin(), x.begin() + hd, 0.0f);  // an all-zero (row, head): scale 0, q 0
      x[size_t(hd)] = 1e4f;                       // an outlier dominates its row's scale
      std::vector<int8_t> q(x.size()), q_ref(x.size());
      std::vector<float> s(size_t(rows * heads)), s_ref(s.size());
      QuantizeKvRows(x.data(), q.data(), s.data(), rows, heads, hd);
      reference::QuantizeKvRows(x.data(), q_ref.data(), s_ref.data(), rows, heads, hd);
      ASSERT_EQ(q, q_ref) << "hd=" << hd << " heads=" << heads;
      ASSERT_EQ(s, s_ref) << "hd=" << hd << " heads=" << heads;
      EXPECT_EQ(s[0], 0.0f);
      // Symmetric absmax: each row's largest |x| maps to ±127 and the error is <= scale/2.
      for (int64_t r = 1; r < rows * heads; ++r) {
        int amax = 0;
        for (int64_t i = 0; i < hd; ++i) {
          const float xi = x[size_t(r * hd + i)];
          const float err = std::fabs(float(q[size_t(r * hd + i)]) * s[size_t(r)] - xi);
          ASSERT_LE(err, 0.5f * s[size_t(r)] * 1.0001f + 1e-30f) << "hd=" << hd << " row " << r;
          amax = std::max(amax, std::abs(int(q[size_t(r * hd + i)])));
        }
        EXPECT_EQ(amax, 127) << "hd=" << hd << " row " << r;
      }
    }
  }
}

TEST_P(AttentionQ8Test, MatchesReferenceOnAwkwardShapes) {
  // head_dim 16/32/64/80/96/128/256 (and odd), 1 and many visible positions, GQA ratios 1..8.
  const AttentionShape shapes[] = {
      {1, 1, 1, 1, 16},   {1, 7, 4, 1, 32},    {3, 5, 4, 2, 64},   {8, 64, 4, 2, 80},
      {1, 64, 6, 2, 96},  {5, 31, 2, 2, 128},  {4, 17, 8, 1, 256}, {2, 33, 8, 8, 64},
      {1, 129, 8, 2, 128}, {16, 1, 4, 1, 16},  {7, 3, 3, 1, 7},    {1, 300, 2, 1, 80},
      {32, 32, 2, 1, 96}, {1, 1, 16, 2, 256},  {6, 11, 4, 4, 33},  {2, 2, 2, 1, 1},
      {9, 40, 6, 3, 48},  {1, 513, 4, 4, 64},  {12, 8, 1, 1, 128}, {3, 65, 4, 2, 256},
      {3, 9, 8, 4, 8},    {1, 40, 8, 4, 8},    {5, 12, 4, 2, 4},
      // Prefill-sized calls: scored from transposed key blocks with their row scales.
      {20, 40, 8, 2, 64}, {17, 9, 6, 3, 128},  {24, 0, 4, 4, 48},
  };
  testing::ForEachAttentionCase(shapes, 500, [](const testing::AttentionCase& c) {
    const Q8Inputs in = MakeQ8Inputs(c.shape, c.seed, c.hidden, c.empty_row0);
    const auto got = RunQ8(in, c.scale, c.softcap, Impl::kSimd);
    const auto want = RunQ8(in, c.scale, c.softcap, Impl::kReference);
    const float vmax = MaxAbs(in);
    ASSERT_TRUE(AllNear(got, want, 2e-5f, 2e-5f * vmax)) << c;
    // Reading int8 rows is the f32 kernel over the dequantized rows.
    const auto f32 = RunQ8(in, c.scale, c.softcap, Impl::kF32OverDequantized);
    ASSERT_TRUE(AllNear(got, f32, 2e-5f, 2e-5f * vmax)) << "vs f32 over dequantized rows, " << c;
  });
}

TEST_P(AttentionQ8Test, HiddenSlotsAreNeverReadOrScored) {
  // Decode over a 2048-slot cache holding 9 committed tokens, plus the new token.
  const AttentionShape s{1, 2048, 4, 2, 64};
  Q8Inputs in = MakeQ8Inputs(s, 7, 0.0, false);
  const int64_t visible_slots = 9;
  for (int64_t c = visible_slots; c < s.L; ++c) {
    in.mask[size_t(c)] = -kInf;
    for (int64_t g = 0; g < s.Hkv; ++g) {  // poison: a read of a hidden slot's scale yields NaN
      in.kcs[size_t(g * s.L + c)] = NAN;
      in.vcs[size_t(g * s.L + c)] = NAN;
    }
  }
  const int64_t before = AttentionQ8ScoresComputedForTest();
  const auto got = RunQ8(in, 0.125f, 0.0f, Impl::kSimd);
  EXPECT_EQ(AttentionQ8ScoresComputedForTest() - before, s.Hq * (visible_slots + 1));
  for (float x : got) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(AllNear(got, RunQ8(in, 0.125f, 0.0f, Impl::kReference), 2e-5f, 2e-5f * MaxAbs(in)));
}

// A chunk's rows (scored from transposed key blocks) get the bits of one-row calls (scored row
// by row) over a cache holding the same int8 rows and scales.
TEST_P(AttentionQ8Test, ChunkRowsEqualOneRowCallsBitForBit) {
  const AttentionShape shapes[] = {{20, 7, 8, 2, 64}, {33, 40, 4, 1, 32}, {17, 5, 6, 3, 128}};
  testing::ForEachAttentionCase(shapes, 700, [](const testing::AttentionCase& c) {
    const AttentionShape& s = c.shape;
    const Q8Inputs in = MakeQ8Inputs(s, c.seed, c.hidden, c.empty_row0);
    const auto chunk = RunQ8(in, c.scale, c.softcap, Impl::kSimd);
    const AttentionShape one{1, s.L + s.T, s.Hq, s.Hkv, s.hd};
    Q8Inputs row = MakeQ8Inputs(one, c.seed + 1000, 0.0, false);
    for (int64_t g = 0; g < s.Hkv; ++g) {
      for (int64_t c2 = 0; c2 < s.L + s.T; ++c2) {
        const size_t dst_row = size_t(g * one.L + c2);
        const size_t src_row = c2 < s.L ? size_t(g * s.L + c2) : size_t((c2 - s.L) * s.Hkv + g);
        const auto& k = c2 < s.L ? in.kc : in.k;
        const auto& v = c2 < s.L ? in.vc : in.v;
        std::copy_n(k.begin() + int64_t(src_row) * s.hd, s.hd, row.kc.begin() + int64_t(dst_row) * s.hd);
        std::copy_n(v.begin() + int64_t(src_row) * s.hd, s.hd, row.vc.begin() + int64_t(dst_row) * s.hd);
        row.kcs[dst_row] = (c2 < s.L ? in.kcs : in.ks)[src_row];
        row.vcs[dst_row] = (c2 < s.L ? in.vcs : in.vs)[src_row];
      }
    }
    for (int64_t t = 0; t < s.T; ++t) {
      std::copy_n(in.q.begin() + t * s.Hq * s.hd, s.Hq * s.hd, row.q.begin());
      std::copy_n(in.mask.begin() + t * (s.L + s.T), s.L + s.T, row.mask.begin());
      row.mask.back() = -kInf;
      const auto got = RunQ8(row, c.scale, c.softcap, Impl::kSimd);
      ASSERT_EQ(std::memcmp(got.data(), chunk.data() + t * s.Hq * s.hd, got.size() * sizeof(float)), 0)
          << c << ": row " << t << " differs from its one-row call";
    }
  });
}

TEST_P(AttentionQ8Test, RowWithoutVisibleColumnIsZero) {
  const Q8Inputs in = MakeQ8Inputs({2, 4, 2, 1, 8}, 9, 0.0, /*empty_row0=*/true);
  const auto got = RunQ8(in, 0.5f, 0.0f, Impl::kSimd);
  for (int64_t i = 0; i < 2 * 8; ++i) EXPECT_EQ(got[size_t(i)], 0.0f);
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(AttentionQ8Test);

// Int8 caches lose little: attention over quantized rows stays close to the f32 result.
TEST(AttentionQ8Accuracy, QuantizedCacheStaysCloseToF32) {
  const AttentionShape s{4, 100, 8, 2, 64};
  const testing::AttentionRows rows = testing::RandomAttentionRows(s, 1);
  const auto& [q, k, v, kc, vc] = rows;
  std::vector<float> mask(size_t(s.T * (s.L + s.T)), 0.0f);
  std::vector<float> scratch(size_t(AttentionScratchFloats(s.L, s.T, s.Hq, s.Hkv, s.hd))), want(q.size()), got(q.size());
  Attention(q.data(), k.data(), v.data(), kc.data(), vc.data(), mask.data(), want.data(),
            scratch.data(), s.T, s.L, s.Hq, s.Hkv, s.hd, 0.125f, 0.0f);
  std::vector<int8_t> k8(k.size()), v8(v.size()), kc8(kc.size()), vc8(vc.size());
  std::vector<float> ks(size_t(s.T * s.Hkv)), vs(ks.size()), kcs(size_t(s.Hkv * s.L)), vcs(kcs.size());
  QuantizeKvRows(k.data(), k8.data(), ks.data(), s.T, s.Hkv, s.hd);
  QuantizeKvRows(v.data(), v8.data(), vs.data(), s.T, s.Hkv, s.hd);
  QuantizeKvRows(kc.data(), kc8.data(), kcs.data(), s.Hkv * s.L, 1, s.hd);
  QuantizeKvRows(vc.data(), vc8.data(), vcs.data(), s.Hkv * s.L, 1, s.hd);
  AttentionQ8(q.data(), k8.data(), ks.data(), v8.data(), vs.data(), kc8.data(), kcs.data(), vc8.data(),
              vcs.data(), mask.data(), got.data(), scratch.data(), s.T, s.L, s.Hq, s.Hkv, s.hd, 0.125f, 0.0f);
  double sig = 0, err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    sig += double(want[i]) * want[i];
    err += double(got[i] - want[i]) * (got[i] - want[i]);
  }
  const double sqnr_db = 10.0 * std::log10(sig / err);
  std::printf("int8 KV attention SQNR vs f32: %.1f dB\n", sqnr_db);
  EXPECT_GT(sqnr_db, 30.0);
}

TEST(KvCommitQ8, WritesValidRowsIntoRingSlotsWithTheirScales) {
  const int64_t T = 4, L = 3, H = 2, hd = 5;
  std::vector<int8_t> k(size_t(T * H * hd)), v(k.size());
  std::vector<float> ks(size_t(T * H)), vs(ks.size());
  for (size_t i = 0; i < k.size(); ++i) { k[i] = int8_t(i); v[i] = int8_t(-int(i)); }
  for (size_t i = 0; i < ks.size(); ++i) { ks[i] = float(i) + 0.5f; vs[i] = float(i) + 0.25f; }
  const int32_t pos[T] = {4, -1, 5, 6};  // row 1 is padding; 6 wraps onto slot 0
  std::vector<int8_t> kc(size_t(H * L * hd), 99), vc(kc.size(), 99);
  std::vector<float> kcs(size_t(H * L), -1.0f), vcs(kcs.size(), -1.0f);
  KvCommitQ8(k.data(), ks.data(), v.data(), vs.data(), pos, kc.data(), kcs.data(), vc.data(),
             vcs.data(), T, L, H, hd);
  for (int64_t h = 0; h < H; ++h) {
    // slot 1 ← row 0 (pos 4), slot 2 ← row 2 (pos 5), slot 0 ← row 3 (pos 6)
    const int64_t src_of_slot[3] = {3, 0, 2};
    for (int64_t slot = 0; slot < L; ++slot) {
      const int64_t src = src_of_slot[slot] * H + h, dst = h * L + slot;
      EXPECT_EQ(kcs[size_t(dst)], ks[size_t(src)]);
      EXPECT_EQ(vcs[size_t(dst)], vs[size_t(src)]);
      for (int64_t i = 0; i < hd; ++i) {
        EXPECT_EQ(kc[size_t(dst * hd + i)], k[size_t(src * hd + i)]);
        EXPECT_EQ(vc[size_t(dst * hd + i)], v[size_t(src * hd + i)]);
      }
    }
  }
}

}  // namespace
}  // namespace slm::kernels
