// Which AVX-512 instructions the int4 decode tiles can issue beside vpdpbusd: throughput of
// vpdpbusd alone and paired with each other op the split-x tile (src/kernels/matmul_q4_split_x.cc)
// spends per 64-byte row chunk. 12 independent chains per kind, so latency is covered and the
// time per iteration is set by the ports. Counter `ops`: instructions per second, all kinds;
// compare a pair's time against vpdpbusd alone: the same time (twice the ops/s) means the second
// op runs on other ports, twice the time means both share vpdpbusd's ports.
//
// Zen 5 (EPYC family 26 model 2, twenty-seventh session; `staticlm_bench --benchmark_filter=
// BM_PortMix --benchmark_repetitions=5`, medians, µs per 2^20 iterations): vpdpbusd 1692,
// vfmadd231ps 1645, vpdpbusd + vfmadd231ps 3379 (they share two ports: 7.4 G ops/s either way),
// + vcvtdq2ps 1738, + vpandd 1597, + vpslld 1647 (other ports, free), + vpermps 2499 (partly
// shared). So per 128-weight row chunk the split-x tile's 6 vpdpbusd + vmulps + vfmadd need 4
// cycles of those two ports, the 8da4w tile's 2 vpdpbusd + a quarter of 4 FMAs 1.5.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"

namespace {

#if SLM_HAVE_VNNI_KERNELS

// Every mix but kFma runs vpdpbusd; the pairs add one more op per chain.
enum Mix : int { kDpbusd, kFma, kDpbusdFma, kDpbusdCvt, kDpbusdAnd, kDpbusdShift, kDpbusdPermps };

#define SLM_PORT_MIX_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// Runs `iters` iterations of 12 chains of mix M; returns the instructions issued.
template <int M>
SLM_VNNI_TARGET __attribute__((noinline)) int64_t PortMixLoop(int64_t iters) {
#define SLM_DECL(i) __m512i a##i = _mm512_set1_epi32(i); __m512 f##i = _mm512_set1_ps(float(i));
  SLM_PORT_MIX_12(SLM_DECL)
#undef SLM_DECL
  const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(5);
  const __m512 s = _mm512_set1_ps(1.0001f);
  for (int64_t it = 0; it < iters; ++it) {
#define SLM_STEP(i)                                                                                         \
  if constexpr (M != kFma) a##i = _mm512_dpbusd_epi32(a##i, b, c);                                          \
  if constexpr (M == kFma || M == kDpbusdFma) f##i = _mm512_fmadd_ps(f##i, s, s);                           \
  if constexpr (M == kDpbusdCvt) f##i = _mm512_cvtepi32_ps(_mm512_castps_si512(f##i));                      \
  if constexpr (M == kDpbusdAnd) f##i = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(f##i), b)); \
  if constexpr (M == kDpbusdShift) f##i = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(f##i), 1)); \
  if constexpr (M == kDpbusdPermps) f##i = _mm512_permutexvar_ps(b, f##i);
    SLM_PORT_MIX_12(SLM_STEP)
#undef SLM_STEP
#define SLM_KEEP(i) __asm__ volatile("" : "+v"(a##i), "+v"(f##i));
    SLM_PORT_MIX_12(SLM_KEEP)
#undef SLM_KEEP
  }
  return iters * 12 * (M == kDpbusd || M == kFma ? 1 : 2);
}

template <int M>
void BM_PortMix(benchmark::State& state) {
  if (!slm::kernels::VnniAvailable()) return state.SkipWithError("no AVX-512 VNNI on this CPU");
  constexpr int64_t kIters = 1 << 20;
  int64_t ops = 0;
  for (auto _ : state) ops += PortMixLoop<M>(kIters);
  state.counters["ops"] = benchmark::Counter(double(ops), benchmark::Counter::kIsRate);
}
BENCHMARK_TEMPLATE(BM_PortMix, kDpbusd)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_PortMix, kFma)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_PortMix, kDpbusdFma)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_PortMix, kDpbusdCvt)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_PortMix, kDpbusdAnd)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_PortMix, kDpbusdShift)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_PortMix, kDpbusdPermps)->Unit(benchmark::kMicrosecond);

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace
