// Roofline probes: per-target loops (Highway) run on every pool thread at once.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/roofline.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/vec_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of n floats with 4 independent accumulators: pure streaming reads.
float StreamSum(const float* p, int64_t n) {
  const hn::ScalableTag<float> d;
  const size_t NL = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * NL <= size_t(n); i += 4 * NL) {
    a0 = hn::Add(a0, hn::Load(d, p + i));
    a1 = hn::Add(a1, hn::Load(d, p + i + NL));
    a2 = hn::Add(a2, hn::Load(d, p + i + 2 * NL));
    a3 = hn::Add(a3, hn::Load(d, p + i + 3 * NL));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// `iters` rounds of 12 independent FMA chains; returns FLOPs done (and a value to keep).
double FmaLoop(int64_t iters, float* sink) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
  using V = hn::Vec<decltype(d)>;
  SLM_VEC_TILE(V, a, 12);
  HWY_UNROLL(12)
  for (int j = 0; j < 12; ++j) a[j] = hn::Set(d, float(j));
  for (int64_t i = 0; i < iters; ++i) {
    HWY_UNROLL(12)
    for (int j = 0; j < 12; ++j) a[j] = hn::MulAdd(a[j], m, c);
  }
  auto s = a[0];
  HWY_UNROLL(12)
  for (int j = 1; j < 12; ++j) s = hn::Add(s, a[j]);
  *sink = hn::GetLane(s);
  return double(iters) * 12 * 2 * double(hn::Lanes(d));
}

// int16 pairwise multiply-add into int32 (the dynamic kernels' inner op where there is no VNNI or
// Arm dot product), 10 independent chains. Returns int8 OPs (2 per product). Each product takes
// its chain's sum as one operand, so none is loop-invariant: with fixed operands (widened from a
// constant buffer) GCC hoisted the multiply-adds out of the loop and the probe timed only the
// adds — 1735 "GOP/s" on a 2-core Zen 2, 8x the instruction's rate, unseen until this probe ran
// on a CPU without VNNI (thirty-sixth session). Zen 2: one multiply-add per cycle at 4 cycles'
// latency, 216 GOP/s on 2 cores with 8 or 10 chains (12 made GCC keep sums on the stack: 185).
double Int8Loop(int64_t iters, int32_t* sink) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const auto w = hn::Iota(d16, 1);
  using V32 = hn::Vec<decltype(d32)>;
  SLM_VEC_TILE(V32, s0, 10);
  SLM_VEC_TILE(V32, s1, 10);
  HWY_UNROLL(10)
  for (int j = 0; j < 10; ++j) {
    s0[j] = hn::Set(d32, j + 1);
    s1[j] = hn::Zero(d32);
  }
  for (int64_t i = 0; i < iters; ++i) {
    HWY_UNROLL(10)
    for (int j = 0; j < 10; ++j) s0[j] = hn::ReorderWidenMulAccumulate(d32, hn::BitCast(d16, s0[j]), w, s0[j], s1[j]);
  }
  auto s = hn::Add(s0[0], s1[0]);
  HWY_UNROLL(10)
  for (int j = 1; j < 10; ++j) s = hn::Add(s, hn::Add(s0[j], s1[j]));
  *sink = hn::GetLane(s);
  return double(iters) * 10 * 2 * double(hn::Lanes(d16));
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/roofline.h"

namespace slm::kernels {

HWY_EXPORT(StreamSum);
HWY_EXPORT(FmaLoop);
HWY_EXPORT(Int8Loop);

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs `round` (all threads) until `seconds` pass; returns the best work/s of one round.
template <typename Round>
double BestRate(double seconds, Round&& round) {
  double best = 0;
  const double end = Now() + seconds;
  do {
    const double t0 = Now();
    const double work = round();
    const double dt = Now() - t0;
    if (dt > 0) best = std::max(best, work / dt);
  } while (Now() < end);
  return best;
}
}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(uint64_t bytes)
    : n_(int64_t(bytes / sizeof(float)) / 64 * 64),
      buf_(Buffer::Allocate(size_t(n_) * sizeof(float))) {  // zeroed: every page touched
  float* p = buf_.as<float>();
  // As MappedFile does for the weights: a bound probed on 4 KB pages would read lower than what
  // the weights can get (the buffer is a fresh page-aligned mapping).
  AdviseHugePages(p, size_t(n_) * sizeof(float));
  for (int64_t i = 0; i < n_; i += 1024) p[i] = float(i & 7);
}

double ReadBandwidthProbe::Measure(ThreadPool& pool, double seconds) {
  const float* p = buf_.as<float>();
  std::atomic<float> sink{0};
  return BestRate(seconds, [&] {
    pool.ParallelFor(n_, 64, [&](int64_t b, int64_t e) {
      sink.store(HWY_DYNAMIC_DISPATCH(StreamSum)(p + b, e - b), std::memory_order_relaxed);
    });
    return double(n_) * sizeof(float);
  });
}

double MeasureF32FmaPeak(ThreadPool& pool, double seconds) {
  std::vector<double> done(size_t(pool.size()));
  return BestRate(seconds, [&] {
    pool.ParallelFor(pool.size(), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) {
        float sink;
        done[size_t(t)] = HWY_DYNAMIC_DISPATCH(FmaLoop)(2000000, &sink);
        if (sink == 12345.0f) done[size_t(t)] += 1;  // keeps the loop observable
      }
    });
    double total = 0;
    for (double d : done) total += d;
    return total;
  });
}

namespace {
double HighwayInt8Loop(int64_t iters, int32_t* sink) { return HWY_DYNAMIC_DISPATCH(Int8Loop)(iters, sink); }

struct Int8Probe {
  const char* instruction;
  double (*loop)(int64_t iters, int32_t* sink);
};

// The dynamic kernels' prefill inner op, in the dispatch's order: vpdpbusd where they run the
// VNNI bodies (the 256-bit form on AVX-VNNI CPUs), smmla / sdot on Arm CPUs with the int8 matrix
// multiply / the dot product, else the Highway sequence.
Int8Probe ActiveInt8Probe() {
  if (VnniAvailable()) return {"vpdpbusd", VnniDotLoop};
  if (AvxVnniAvailable()) return {"vpdpbusd (256-bit, AVX-VNNI)", AvxVnniDotLoop};
  if (I8mmAvailable()) return {"smmla", I8mmDotLoop};
  if (DotprodAvailable()) return {"sdot", DotprodDotLoop};
  return {"int16 multiply-add", HighwayInt8Loop};
}
}  // namespace

const char* Int8PeakInstruction() { return ActiveInt8Probe().instruction; }

double MeasureInt8DotPeak(ThreadPool& pool, double seconds) {
  std::vector<double> done(size_t(pool.size()));
  const Int8Probe probe = ActiveInt8Probe();
  return BestRate(seconds, [&] {
    pool.ParallelFor(pool.size(), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) {
        int32_t sink;
        done[size_t(t)] = probe.loop(2000000, &sink);
        if (sink == 12345) done[size_t(t)] += 1;
      }
    });
    double total = 0;
    for (double d : done) total += d;
    return total;
  });
}

double MeasureAmxInt8Peak(ThreadPool& pool, double seconds) {
  if (!AmxAvailable()) return 0;
  std::vector<double> done(size_t(pool.size()));
  return BestRate(seconds, [&] {
    pool.ParallelFor(pool.size(), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) {
        int32_t sink;
        done[size_t(t)] = AmxDotLoop(200000, &sink);
        if (sink == 12345) done[size_t(t)] += 1;
      }
    });
    double total = 0;
    for (double d : done) total += d;
    return total;
  });
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
