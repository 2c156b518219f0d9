// Shared case generation of the attention kernel tests (attention_test.cc for f32 K/V,
// attention_q8_test.cc for int8 K/V): shapes, random rows and masks, and the sweep over
// shapes × hidden fraction × softcap that both run against their scalar references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <random>
#include <span>
#include <vector>

#include "kernel_test_util.h"

namespace slm::kernels::testing {

// T new rows over L cache slots; Hq query heads sharing Hkv kv heads; head_dim hd.
struct AttentionShape {
  int64_t T, L, Hq, Hkv, hd;
};

inline std::ostream& operator<<(std::ostream& os, const AttentionShape& s) {
  return os << "T=" << s.T << " L=" << s.L << " Hq=" << s.Hq << " Hkv=" << s.Hkv << " hd=" << s.hd;
}

// Random f32 rows in the layouts of kernels.h Attention, from seeds seed .. seed+4:
// q [T, Hq*hd], k, v [T, Hkv*hd], k_cache, v_cache [Hkv, L, hd]. The v rows are drawn with
// standard deviation v_scale (this call's) and v_cache_scale (the cache's).
struct AttentionRows {
  std::vector<float> q, k, v, k_cache, v_cache;
};

inline AttentionRows RandomAttentionRows(const AttentionShape& s, uint32_t seed,
                                         float v_scale = 1.0f, float v_cache_scale = 1.0f) {
  AttentionRows r;
  r.q = RandomFloats(size_t(s.T * s.Hq * s.hd), seed);
  r.k = RandomFloats(size_t(s.T * s.Hkv * s.hd), seed + 1);
  r.v = RandomFloats(size_t(s.T * s.Hkv * s.hd), seed + 2, v_scale);
  r.k_cache = RandomFloats(size_t(s.Hkv * s.L * s.hd), seed + 3);
  r.v_cache = RandomFloats(size_t(s.Hkv * s.L * s.hd), seed + 4, v_cache_scale);
  return r;
}

// Additive mask [T, L+T] from seed: each column hidden (-inf) with probability `hidden`, about
// 10% of the others carrying a finite bias (-1.5), and row 0 fully hidden when `empty_row0`.
inline std::vector<float> RandomAttentionMask(const AttentionShape& s, uint32_t seed,
                                              double hidden, bool empty_row0) {
  const int64_t cols = s.L + s.T;
  std::vector<float> mask(size_t(s.T * cols), 0.0f);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (float& m : mask) {
    const double r = u(rng);
    m = r < hidden ? -kInf : (r < hidden + 0.1 ? -1.5f : 0.0f);
  }
  if (empty_row0) std::fill(mask.begin(), mask.begin() + cols, -kInf);
  return mask;
}

// One case of the reference sweep.
struct AttentionCase {
  AttentionShape shape;
  uint32_t seed;   // for the rows (seed .. seed+4) and the mask (seed+5)
  double hidden;   // fraction of hidden columns
  bool empty_row0; // row 0 has no visible column (with the densest masks)
  float scale;     // 1/√hd
  float softcap;   // 0 (off) or 50
};

inline std::ostream& operator<<(std::ostream& os, const AttentionCase& c) {
  return os << c.shape << " hidden=" << c.hidden << " softcap=" << c.softcap;
}

// Calls fn(case) for every shape × hidden fraction {0, 0.5, 0.95} × softcap {0, 50}, seeds
// counting up from first_seed; stops after the first case with a fatal failure.
template <class Fn>
void ForEachAttentionCase(std::span<const AttentionShape> shapes, uint32_t first_seed, Fn fn) {
  uint32_t seed = first_seed;
  for (const AttentionShape& s : shapes) {
    for (double hidden : {0.0, 0.5, 0.95}) {
      for (float softcap : {0.0f, 50.0f}) {
        fn(AttentionCase{s, seed++, hidden, hidden > 0.9, 1.0f / std::sqrt(float(s.hd)), softcap});
        if (::testing::Test::HasFatalFailure()) return;  // an ASSERT in fn stops the sweep
      }
    }
  }
}

// max |x| over the given vectors (the outputs are convex combinations of v rows, so this
// bounds their size and scales the absolute tolerance).
inline float MaxAbs(std::initializer_list<const std::vector<float>*> vs) {
  float m = 0.0f;
  for (const std::vector<float>* v : vs) {
    for (float x : *v) m = std::max(m, std::fabs(x));
  }
  return m;
}

}  // namespace slm::kernels::testing
