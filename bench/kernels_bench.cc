// Microbenchmarks of the hot kernels on the dispatched SIMD target (printed in the context as
// "simd_target"). Run a few seconds at most, e.g.:
//   ./staticlm_bench --benchmark_min_time=0.1 --benchmark_filter=MatMul
// Not run by CI as a timed test.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention_q8.h"
#include "kernels/decode_prefetch.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/quant_kernels.h"

namespace {

using slm::kernels::ActiveSimdTarget;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// y[R,N] = x[R,K]·w[N,K]ᵀ. Args: R, K, N. Reports FLOP/s and weight bytes/s (decode is
// bandwidth-bound: R = 1 reads every weight once).
void BM_MatMulF32(benchmark::State& state) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  const auto x = Random(size_t(R * K), 1), w = Random(size_t(N * K), 2);
  std::vector<float> y(size_t(R * N));
  for (auto _ : state) {
    slm::kernels::MatMulF32(x.data(), w.data(), nullptr, y.data(), R, K, N);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(double(2 * R * K * N) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.counters["wbytes/s"] = benchmark::Counter(
      double(4 * N * K) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(ActiveSimdTarget());
}
BENCHMARK(BM_MatMulF32)
    ->Args({1, 2048, 2048})
    ->Args({1, 2048, 8192})
    ->Args({1, 2048, 32000})  // a 1B lm_head: 262 MB from DRAM
    ->Args({32, 2048, 2048})
    ->Args({128, 2048, 2048})
    ->Args({128, 8192, 2048})
    ->Args({1, 512, 512})
    ->Args({32, 512, 512})
    ->Unit(benchmark::kMicrosecond);

// The product as the runtime runs it on a prefill chunk: output columns split over a pool of
// state.range(3) threads. Args: R, K, N, threads.
void BM_MatMulF32Pool(benchmark::State& state) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  const auto x = Random(size_t(R * K), 1), w = Random(size_t(N * K), 2);
  std::vector<float> y(size_t(R * N));
  slm::ThreadPool pool(int(state.range(3)));
  for (auto _ : state) {
    pool.ParallelFor(N, 8, [&](int64_t nb, int64_t ne) {
      slm::kernels::MatMulF32Columns(x.data(), w.data(), nullptr, y.data(), R, K, N, nb, ne);
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(double(2 * R * K * N) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.SetLabel(ActiveSimdTarget());
}
BENCHMARK(BM_MatMulF32Pool)->ArgsProduct({{32, 64, 128, 512}, {2048}, {8192}, {1, 2}})->ArgsProduct({{128, 512}, {8192}, {2048}, {1, 2}})->ArgsProduct({{128}, {2048}, {512, 2048}, {1, 2}})->Unit(benchmark::kMillisecond);

// Attention benchmarks: Llama-3.2-1B-like heads (Hq 32, Hkv 8, head_dim 64) over an L-slot
// cache. Random q [T, Hq·hd], k / v [T, Hkv·hd], k / v caches [Hkv, L, hd].
constexpr int64_t kBenchHq = 32, kBenchHkv = 8, kBenchHd = 64;

struct AttentionInputs {
  std::vector<float> q, k, v, kc, vc;
};

AttentionInputs RandomAttentionInputs(int64_t T, int64_t L) {
  return {Random(size_t(T * kBenchHq * kBenchHd), 1), Random(size_t(T * kBenchHkv * kBenchHd), 2),
          Random(size_t(T * kBenchHkv * kBenchHd), 3), Random(size_t(kBenchHkv * L * kBenchHd), 4),
          Random(size_t(kBenchHkv * L * kBenchHd), 5)};
}

// mask [T, L + T]: row t sees the first `past` cache slots and this call's rows 0..t.
std::vector<float> ChunkMask(int64_t T, int64_t L, int64_t past) {
  std::vector<float> mask(size_t(T * (L + T)), -std::numeric_limits<float>::infinity());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < past && c < L; ++c) mask[size_t(t * (L + T) + c)] = 0.0f;
    for (int64_t c = 0; c <= t; ++c) mask[size_t(t * (L + T) + L + c)] = 0.0f;
  }
  return mask;
}

void TimeAttention(benchmark::State& state, int64_t T, int64_t L, int64_t past) {
  const AttentionInputs in = RandomAttentionInputs(T, L);
  const std::vector<float> mask = ChunkMask(T, L, past);
  std::vector<float> out(size_t(T * kBenchHq * kBenchHd));
  std::vector<float> scratch(size_t(slm::kernels::AttentionScratchFloats(L, T, kBenchHq, kBenchHkv, kBenchHd)));
  for (auto _ : state) {
    slm::kernels::Attention(in.q.data(), in.k.data(), in.v.data(), in.kc.data(), in.vc.data(), mask.data(),
                            out.data(), scratch.data(), T, L, kBenchHq, kBenchHkv, kBenchHd, 0.125f, 0.0f);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(ActiveSimdTarget());
}

// Decode attention over an L = 2048 cache with `visible` committed slots (+ the new token).
// Args: visible. Cost should scale with `visible`, not with L.
void BM_AttentionDecode(benchmark::State& state) { TimeAttention(state, 1, 2048, state.range(0)); }
BENCHMARK(BM_AttentionDecode)->Arg(10)->Arg(2048)->Unit(benchmark::kMicrosecond);

// Prefill attention: a chunk of T rows after `past` committed slots of an L = 1024 cache, causal
// inside the chunk (T = 512, past 0: the 1B bench's 512-token prefill). Args: T, past. Reports
// visible (row, head, column) scores per second.
void BM_AttentionPrefill(benchmark::State& state) {
  const int64_t T = state.range(0), past = state.range(1);
  TimeAttention(state, T, 1024, past);
  const double scores = double(kBenchHq) * double(T) * (double(past) + double(T + 1) / 2);
  state.counters["scores/s"] = benchmark::Counter(scores * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionPrefill)->Args({128, 0})->Args({128, 384})->Args({128, 896})->Args({512, 0})->Unit(benchmark::kMicrosecond);

// BM_AttentionDecode over int8 caches (cache format kv_int8_tokenhead_v1): same shapes, a
// quarter of the cache bytes read per visible slot (plus one scale per row).
void BM_AttentionQ8Decode(benchmark::State& state) {
  const int64_t L = 2048, T = 1, Hq = kBenchHq, Hkv = kBenchHkv, hd = kBenchHd;
  const AttentionInputs in = RandomAttentionInputs(T, L);
  std::vector<int8_t> k8(in.k.size()), v8(in.v.size()), kc8(in.kc.size()), vc8(in.vc.size());
  std::vector<float> ks(size_t(T * Hkv)), vs(ks.size()), kcs(size_t(Hkv * L)), vcs(kcs.size());
  slm::kernels::QuantizeKvRows(in.k.data(), k8.data(), ks.data(), T, Hkv, hd);
  slm::kernels::QuantizeKvRows(in.v.data(), v8.data(), vs.data(), T, Hkv, hd);
  slm::kernels::QuantizeKvRows(in.kc.data(), kc8.data(), kcs.data(), Hkv * L, 1, hd);
  slm::kernels::QuantizeKvRows(in.vc.data(), vc8.data(), vcs.data(), Hkv * L, 1, hd);
  const std::vector<float> mask = ChunkMask(T, L, state.range(0));
  std::vector<float> out(size_t(T * Hq * hd));
  std::vector<float> scratch(size_t(slm::kernels::AttentionScratchFloats(L, T, Hq, Hkv, hd)));
  for (auto _ : state) {
    slm::kernels::AttentionQ8(in.q.data(), k8.data(), ks.data(), v8.data(), vs.data(), kc8.data(), kcs.data(),
                              vc8.data(), vcs.data(), mask.data(), out.data(), scratch.data(), T, L, Hq, Hkv, hd,
                              0.125f, 0.0f);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(ActiveSimdTarget());
}
BENCHMARK(BM_AttentionQ8Decode)->Arg(10)->Arg(2048)->Unit(benchmark::kMicrosecond);

// Args: R, D.
void BM_RmsNorm(benchmark::State& state) {
  const int64_t R = state.range(0), D = state.range(1);
  const auto x = Random(size_t(R * D), 1), w = Random(size_t(D), 2);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    slm::kernels::RmsNorm(x.data(), w.data(), y.data(), R, D, 1e-5f, false);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * R * D * 4);
  state.SetLabel(ActiveSimdTarget());
}
BENCHMARK(BM_RmsNorm)->Args({1, 2048})->Args({128, 2048});

// Args: n.
void BM_SwiGlu(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto g = Random(size_t(n), 1), u = Random(size_t(n), 2);
  std::vector<float> y(static_cast<size_t>(n));
  for (auto _ : state) {
    slm::kernels::SwiGlu(g.data(), u.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n);
  state.SetLabel(ActiveSimdTarget());
}
BENCHMARK(BM_SwiGlu)->Arg(8192);

}  // namespace

// ---- Quantized matmuls (kernels/quant_kernels.h). Args: R, K, N. Random bytes as weights: the
// kernels' speed does not depend on the values. wbytes/s counts the quantized weight bytes.
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

void QuantCounters(benchmark::State& state, double wbytes) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  state.counters["OP/s"] = benchmark::Counter(double(2 * R * K * N) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["wbytes/s"] = benchmark::Counter(wbytes * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(ActiveSimdTarget());
}

void BM_MatMulQ8(benchmark::State& state) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  const auto x = Random(size_t(R * K), 1), s = Random(size_t(N), 3);
  const auto w = RandomBytes(size_t(N * K), 2);
  std::vector<float> y(static_cast<size_t>(R * N));
  for (auto _ : state) {
    slm::kernels::MatMulQ8Columns(x.data(), reinterpret_cast<const int8_t*>(w.data()), s.data(), nullptr, y.data(), R, K, N, 0, N);
    benchmark::DoNotOptimize(y.data());
  }
  QuantCounters(state, double(N * K));
}

void BM_MatMulQ4G32(benchmark::State& state) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  const auto x = Random(size_t(R * K), 1), s = Random(size_t(N * K / 32), 3);
  const auto w = RandomBytes(size_t(N * K / 2), 2);
  std::vector<float> y(static_cast<size_t>(R * N));
  for (auto _ : state) {
    slm::kernels::MatMulQ4Columns(x.data(), w.data(), s.data(), nullptr, nullptr, y.data(), R, K, N, 32, 0, N);
    benchmark::DoNotOptimize(y.data());
  }
  QuantCounters(state, double(N * K / 2 + N * K / 8));
}

// Weights as the runtime sees them: 2 MiB-aligned memory with transparent huge pages requested
// (an artifact in the page cache is mapped with huge pages where the kernel allows, bench
// reports the share), filled from `src`.
template <typename T>
class HugePageCopy {
 public:
  explicit HugePageCopy(const std::vector<T>& src) {
    constexpr size_t kHuge = size_t{2} << 20;
    bytes_ = (src.size() * sizeof(T) + kHuge - 1) / kHuge * kHuge;
    p_ = static_cast<T*>(std::aligned_alloc(kHuge, bytes_));
    if (p_ == nullptr) throw std::bad_alloc();
    (void)madvise(p_, bytes_, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
    std::memcpy(p_, src.data(), src.size() * sizeof(T));
  }
  ~HugePageCopy() { std::free(p_); }
  HugePageCopy(const HugePageCopy&) = delete;
  HugePageCopy& operator=(const HugePageCopy&) = delete;
  const T* get() const { return p_; }

 private:
  size_t bytes_ = 0;
  T* p_ = nullptr;
};

// Decode as the runtime walks the layers: kDecodeLayers distinct weight matrices in turn (from
// DRAM, not the cache one matrix can sit in), each split by output columns over a pool of
// state.range(2) threads. Args: K, N, threads. Reports weight bytes/s against the f32 walk.
constexpr int64_t kDecodeLayers = 16;
void WalkCounters(benchmark::State& state, double wbytes) {
  state.counters["wbytes/s"] = benchmark::Counter(wbytes * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(ActiveSimdTarget());
}
void BM_DecodeWalkQ4G32(benchmark::State& state) {
  const int64_t K = state.range(0), N = state.range(1), L = kDecodeLayers;
  const auto x = Random(size_t(K), 1);
  const HugePageCopy<float> s(Random(size_t(L * N * K / 32), 3));
  const HugePageCopy<uint8_t> w(RandomBytes(size_t(L * N * K / 2), 2));
  std::vector<float> y(static_cast<size_t>(N));
  slm::ThreadPool pool(int(state.range(2)));
  for (auto _ : state) {
    for (int64_t l = 0; l < L; ++l) {
      pool.ParallelFor(N, 8, [&](int64_t nb, int64_t ne) {
        slm::kernels::MatMulQ4Columns(x.data(), w.get() + l * N * K / 2, s.get() + l * N * K / 32, nullptr, nullptr,
                                      y.data(), 1, K, N, 32, nb, ne);
      });
    }
    benchmark::DoNotOptimize(y.data());
  }
  WalkCounters(state, double(L * (N * K / 2 + N * K / 8)));
}
BENCHMARK(BM_DecodeWalkQ4G32)->ArgsProduct({{2048}, {8192}, {1, 2}})->ArgsProduct({{8192}, {2048}, {1, 2}})->Unit(benchmark::kMicrosecond);

// The 1B shape's products per layer: q, k, v, o, gate, up and down (2048 -> 2048, 512, 512,
// 2048, 8192, 8192; 8192 -> 2048), each weights then scales as the compiler lays out an artifact,
// 16 layers in turn, in one huge-page buffer. int4 G = 32 (a scale per group) or int8 (a scale per
// row).
struct DecodeLayerProducts {
  struct Product {
    size_t weights, scales;  // byte offsets
    int64_t K, N;
    int64_t scale_count() const { return scales_per_row * N; }
    int64_t scales_per_row;
  };
  std::vector<Product> products;
  size_t bytes = 0;
  explicit DecodeLayerProducts(int bits = 4) {
    constexpr int64_t kShapes[][2] = {{2048, 2048}, {2048, 512}, {2048, 512}, {2048, 2048},
                                      {2048, 8192}, {2048, 8192}, {8192, 2048}};
    for (int64_t l = 0; l < kDecodeLayers; ++l) {
      for (const auto& [K, N] : kShapes) {
        const size_t w = bytes;
        bytes += size_t(N * K * bits / 8);
        const int64_t per_row = bits == 4 ? K / 32 : 1;
        products.push_back({w, bytes, K, N, per_row});
        bytes += size_t(N * per_row) * sizeof(float);
      }
    }
  }
  // The buffer: random nibbles, and group scales drawn as floats. Scales of random bytes (as the
  // buffer first had) are ~0.4% denormal, infinite or NaN, and their products with the x lane
  // scales underflow into denormals far more often: microcode assists that made the int4 tile
  // read ~1.5× slower here than in `staticlm bench --profile` (twenty-fourth session).
  std::vector<uint8_t> Data() const {
    std::vector<uint8_t> data = RandomBytes(bytes, 2);
    for (const auto& p : products) {
      const std::vector<float> scales = Random(size_t(p.scale_count()), uint32_t(p.scales));
      std::memcpy(data.data() + p.scales, scales.data(), scales.size() * sizeof(float));
    }
    return data;
  }
};

// The 1B shape's int4 decode without the rest of the graph: weight-only (f32 x, MatMulQ4Columns)
// and 8da4w (x quantized once per product with its group sums, as the runtime's matmul_q op does,
// MatMulQ4DynColumns). Arg: threads. Against `staticlm bench --profile` it separates the int4
// products' streaming from what the runtime adds between them; against BM_DecodeWalkQ4G32 (one
// shape, matrices back to back) what the mix of shapes costs; against BM_DecodeLayersStreamQ4G32
// (the same bytes read without arithmetic) what the arithmetic costs.
template <bool kDynamic>
void BM_DecodeLayersQ4G32(benchmark::State& state) {
  const DecodeLayerProducts layers;
  const HugePageCopy<uint8_t> data(layers.Data());
  const auto x = Random(8192, 1);
  std::vector<int8_t> xq(8192);
  std::vector<int32_t> group_sums(8192 / 32);
  float xscale = 0;
  std::vector<float> y(8192);
  slm::ThreadPool pool(int(state.range(0)));
  for (auto _ : state) {
    for (const auto& p : layers.products) {
      const float* scales = reinterpret_cast<const float*>(data.get() + p.scales);
      if constexpr (kDynamic) slm::kernels::QuantizeRowsI8(x.data(), xq.data(), &xscale, group_sums.data(), 1, p.K, 32);
      pool.ParallelFor(p.N, 8, [&](int64_t nb, int64_t ne) {
        if constexpr (kDynamic) {
          slm::kernels::MatMulQ4DynColumns(xq.data(), &xscale, group_sums.data(), data.get() + p.weights, scales,
                                           nullptr, nullptr, y.data(), 1, p.K, p.N, 32, nb, ne);
        } else {
          slm::kernels::MatMulQ4Columns(x.data(), data.get() + p.weights, scales, nullptr, nullptr, y.data(), 1, p.K,
                                        p.N, 32, nb, ne);
        }
      });
    }
    benchmark::DoNotOptimize(y.data());
  }
  WalkCounters(state, double(layers.bytes));
}
BENCHMARK(BM_DecodeLayersQ4G32<false>)->Name("BM_DecodeLayersQ4G32")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeLayersQ4G32<true>)->Name("BM_DecodeLayersQ4DynG32")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// The same walk with int8 weights: weight-only (f32 x, MatMulQ8Columns) and 8da8w (x quantized
// once per product, as the runtime's matmul_q op does, MatMulQ8DynColumns). Arg: threads. The
// two read the same bytes, so their ratio is what the tiles' memory walks cost against each other
// with less noise than end-to-end decode (docs/benchmarks.md, twenty-ninth session).
template <bool kDynamic>
void BM_DecodeLayersQ8(benchmark::State& state) {
  const DecodeLayerProducts layers(8);
  const HugePageCopy<uint8_t> data(layers.Data());
  const auto x = Random(8192, 1);
  std::vector<int8_t> xq(8192);
  float xscale = 0;
  std::vector<float> y(8192);
  slm::ThreadPool pool(int(state.range(0)));
  for (auto _ : state) {
    for (const auto& p : layers.products) {
      const int8_t* w = reinterpret_cast<const int8_t*>(data.get() + p.weights);
      const float* scales = reinterpret_cast<const float*>(data.get() + p.scales);
      if constexpr (kDynamic) slm::kernels::QuantizeRowsI8(x.data(), xq.data(), &xscale, nullptr, 1, p.K, p.K);
      pool.ParallelFor(p.N, 8, [&](int64_t nb, int64_t ne) {
        if constexpr (kDynamic) {
          slm::kernels::MatMulQ8DynColumns(xq.data(), &xscale, w, scales, nullptr, y.data(), 1, p.K, p.N, nb, ne);
        } else {
          slm::kernels::MatMulQ8Columns(x.data(), w, scales, nullptr, y.data(), 1, p.K, p.N, nb, ne);
        }
      });
    }
    benchmark::DoNotOptimize(y.data());
  }
  WalkCounters(state, double(layers.bytes));
}
BENCHMARK(BM_DecodeLayersQ8<false>)->Name("BM_DecodeLayersQ8")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeLayersQ8<true>)->Name("BM_DecodeLayersQ8Dyn")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// Rows [n_begin, n_end) of one int4 G = 32 product read in the AVX-512 split-x decode tile's order
// (matmul_q4_split_x.cc): tiles of kN rows, per 64-byte chunk every row of the tile, each row
// prefetching at DecodePrefetchDistance and, once per scale line, the next tile's scale line — but
// each line is only XORed into a sink, no arithmetic. Rows past the last whole tile one at a time.
template <size_t kN>
uint64_t StreamQ4Tiles(const uint8_t* w, const float* scales, size_t K, size_t n_begin, size_t n_end) {
  const size_t row_bytes = K / 2, groups = K / 32, chunks = row_bytes / 64;
  uint64_t sink = 0;
  size_t n = n_begin;
  const auto tile = [&](auto rows_tag) {
    constexpr size_t kRows = decltype(rows_tag)::value;
    for (size_t c = 0; c < chunks; ++c) {
      const size_t ahead = slm::kernels::DecodePrefetchDistance(c * 64, row_bytes, kRows);
      for (size_t r = 0; r < kRows; ++r) {
        const uint8_t* line = w + (n + r) * row_bytes + c * 64;
        slm::kernels::PrefetchDecodeLine(line + ahead);
        uint64_t words[8];
        std::memcpy(words, line, sizeof(words));
        for (uint64_t word : words) sink ^= word;
      }
      if (c % 4 == 0) {  // a scale line holds 4 chunks' group scales of a row
        for (size_t r = 0; r < kRows; ++r) {
          uint32_t first;
          std::memcpy(&first, scales + (n + r) * groups + 4 * c, sizeof(first));
          sink ^= first;
          slm::kernels::PrefetchDecodeLine(scales + (n + r + kRows) * groups + 4 * c);
        }
      }
    }
    n += kRows;
  };
  while (n + kN <= n_end) tile(std::integral_constant<size_t, kN>{});
  while (n < n_end) tile(std::integral_constant<size_t, 1>{});
  return sink;
}

// The memory side of BM_DecodeLayersQ4G32: the same buffer, products, thread split, tile order
// and prefetches, without the arithmetic (StreamQ4Tiles). Arg: threads. Meant as the bound the
// kernel's arithmetic keeps it from, it is not one: with float scales the kernel reads faster
// (twenty-fifth session: 1 thread 21–22 ms against 28–33 ms; eight sinks instead of one were
// slower still, 47 ms), so the scalar walk measures its own loop, not the memory.
void BM_DecodeLayersStreamQ4G32(benchmark::State& state) {
  const DecodeLayerProducts layers;
  const HugePageCopy<uint8_t> data(layers.Data());
  std::vector<uint64_t> sinks(static_cast<size_t>(8 * state.range(0)));  // a line per thread
  slm::ThreadPool pool(int(state.range(0)));
  for (auto _ : state) {
    for (const auto& p : layers.products) {
      const uint8_t* w = data.get() + p.weights;
      const float* scales = reinterpret_cast<const float*>(data.get() + p.scales);
      pool.ParallelFor(p.N, 8, [&](int64_t nb, int64_t ne, int thread) {
        const size_t K = size_t(p.K);
        sinks[8 * size_t(thread)] ^= K / 2 <= 1024 ? StreamQ4Tiles<16>(w, scales, K, size_t(nb), size_t(ne))
                                               : StreamQ4Tiles<8>(w, scales, K, size_t(nb), size_t(ne));
      });
    }
    benchmark::DoNotOptimize(sinks.data());
  }
  WalkCounters(state, double(layers.bytes));
}
BENCHMARK(BM_DecodeLayersStreamQ4G32)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

void BM_DecodeWalkF32(benchmark::State& state) {
  const int64_t K = state.range(0), N = state.range(1), L = kDecodeLayers / 4;  // as many bytes as int4
  const auto x = Random(size_t(K), 1);
  const HugePageCopy<float> w(Random(size_t(L * N * K), 2));
  std::vector<float> y(static_cast<size_t>(N));
  slm::ThreadPool pool(int(state.range(2)));
  for (auto _ : state) {
    for (int64_t l = 0; l < L; ++l) {
      pool.ParallelFor(N, 8, [&](int64_t nb, int64_t ne) {
        slm::kernels::MatMulF32Columns(x.data(), w.get() + l * N * K, nullptr, y.data(), 1, K, N, nb, ne);
      });
    }
    benchmark::DoNotOptimize(y.data());
  }
  WalkCounters(state, double(L * N * K * 4));
}
BENCHMARK(BM_DecodeWalkF32)->ArgsProduct({{2048}, {8192}, {1, 2}})->Unit(benchmark::kMicrosecond);

// The body the dynamic products run, state.range(3), for side-by-side ratios in one run: 0 the
// Highway body of the dispatched target, 1 AVX-512 VNNI, 2 AVX-VNNI (with the Highway AVX2 body
// for the rows between its tiles and panels, as on an AVX-VNNI CPU), 3 the Highway AVX2 body,
// 4 AVX-512 VNNI with the AMX panels (from kVnniPanelRows rows).
// Restores the default dispatch when it goes out of scope.
class DynamicBody {
 public:
  explicit DynamicBody(benchmark::State& state) : body_(state.range(3)) {
    using namespace slm::kernels;
    if ((body_ == 1 || body_ == 4) && !VnniAvailable()) error_ = "no AVX-512 VNNI";
    if (body_ == 4 && !AmxAvailable()) error_ = "no AMX-INT8";
    if (body_ == 2 && !AvxVnniAvailable()) error_ = "no AVX-VNNI";
    if ((body_ == 2 || body_ == 3) && !SelectSimdTarget("AVX2").ok()) error_ = "no AVX2";
    SetVnniEnabledForTest(body_ == 1 || body_ == 4);
    SetAmxEnabledForTest(body_ == 4);
    SetAvxVnniEnabledForTest(body_ == 2);
  }
  ~DynamicBody() {
    slm::kernels::SetAmxEnabledForTest(true);
    (void)slm::kernels::SelectSimdTarget("best");
  }
  const char* error() const { return error_; }
  const char* label() const {
    return body_ == 1 ? "AVX-512 VNNI" : body_ == 2 ? "AVX-VNNI" : body_ == 4 ? "AMX" : ActiveSimdTarget();
  }

 private:
  int64_t body_;
  const char* error_ = nullptr;
};

void BM_MatMulQ8Dyn(benchmark::State& state) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  const DynamicBody body(state);
  if (body.error()) return state.SkipWithError(body.error());
  const auto x = Random(size_t(R * K), 1), s = Random(size_t(N), 3);
  const auto w = RandomBytes(size_t(N * K), 2);
  std::vector<int8_t> xq(static_cast<size_t>(R * K));
  std::vector<float> xs(static_cast<size_t>(R)), y(static_cast<size_t>(R * N));
  for (auto _ : state) {
    slm::kernels::QuantizeRowsI8(x.data(), xq.data(), xs.data(), nullptr, R, K, K);
    slm::kernels::MatMulQ8DynColumns(xq.data(), xs.data(), reinterpret_cast<const int8_t*>(w.data()), s.data(), nullptr, y.data(), R, K, N, 0, N);
    benchmark::DoNotOptimize(y.data());
  }
  QuantCounters(state, double(N * K));
  state.SetLabel(body.label());
}

void BM_MatMulQ4DynG32(benchmark::State& state) {
  const int64_t R = state.range(0), K = state.range(1), N = state.range(2);
  const DynamicBody body(state);
  if (body.error()) return state.SkipWithError(body.error());
  const auto x = Random(size_t(R * K), 1), s = Random(size_t(N * K / 32), 3);
  const auto w = RandomBytes(size_t(N * K / 2), 2);
  std::vector<int8_t> xq(static_cast<size_t>(R * K));
  std::vector<float> xs(static_cast<size_t>(R)), y(static_cast<size_t>(R * N));
  std::vector<int32_t> gs(static_cast<size_t>(R * K / 32));
  for (auto _ : state) {
    slm::kernels::QuantizeRowsI8(x.data(), xq.data(), xs.data(), gs.data(), R, K, 32);
    slm::kernels::MatMulQ4DynColumns(xq.data(), xs.data(), gs.data(), w.data(), s.data(), nullptr, nullptr, y.data(), R, K, N, 32, 0, N);
    benchmark::DoNotOptimize(y.data());
  }
  QuantCounters(state, double(N * K / 2 + N * K / 8));
  state.SetLabel(body.label());
}

// 1×2048×512 (the 1B shape's k / v projections; 512 KiB of int4 weights) stays in a 1 MiB L2:
// the kernel's arithmetic without DRAM in the way.
#define SLM_QUANT_SHAPES ->Args({1, 2048, 512})->Args({1, 2048, 2048})->Args({1, 2048, 8192})->Args({1, 8192, 2048})->Args({1, 8192, 16384})->Args({32, 2048, 2048})->Args({128, 2048, 2048})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_MatMulQ8) SLM_QUANT_SHAPES;
BENCHMARK(BM_MatMulQ4G32) SLM_QUANT_SHAPES;
#define SLM_DYN_SHAPES                                                                                              \
  ->ArgsProduct({{1}, {2048}, {512, 2048, 8192}, {0, 1, 2, 3}})                                                    \
      ->ArgsProduct({{1}, {8192}, {2048, 16384}, {1, 2, 3}})                                                        \
      ->ArgsProduct({{32, 128}, {2048}, {2048}, {0, 1, 2, 3}})->Args({128, 8192, 2048, 1})->Args({128, 2048, 8192, 1}) \
      ->Args({512, 2048, 8192, 1})->Args({512, 8192, 2048, 1})                                                     \
      ->ArgsProduct({{4, 8, 12}, {2048}, {2048}, {2, 3}})                                                           \
      ->ArgNames({"R", "K", "N", "body"})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_MatMulQ8Dyn) SLM_DYN_SHAPES;
// Prefill shapes of the 1B model (q / o, gate / up, down), VNNI panels against AMX.
#define SLM_AMX_SHAPES                                          \
  ->ArgsProduct({{128, 512}, {2048}, {2048, 8192}, {1, 4}})     \
      ->ArgsProduct({{128, 512}, {8192}, {2048}, {1, 4}})       \
      ->ArgNames({"R", "K", "N", "body"})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_MatMulQ8Dyn) SLM_AMX_SHAPES;
BENCHMARK(BM_MatMulQ4DynG32) SLM_AMX_SHAPES;

// tdpbssd's peak on one core: 4 independent 16×16×64 tile products per round.
void BM_AmxDotPeak(benchmark::State& state) {
  if (!slm::kernels::AmxAvailable()) return state.SkipWithError("no AMX-INT8");
  double ops = 0;
  int32_t sink = 0;
  for (auto _ : state) ops += slm::kernels::AmxDotLoop(100000, &sink);
  benchmark::DoNotOptimize(sink);
  state.counters["GOP/s"] = benchmark::Counter(ops / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AmxDotPeak)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatMulQ4DynG32) SLM_DYN_SHAPES;

}  // namespace
