// Calibration statistics: accumulating H = Σ xᵀx (quant/calibration_stats.h) and output error
// energies through H or its low-rank factor (quant/hessian_factor.h) — what calibrated
// quantization (gptq, awq) of a large model spends its time on besides running the model.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "quant/calibration_stats.h"
#include "quant/hessian_factor.h"

namespace {

std::vector<float> Normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Adds `rows` activation rows of K inputs to H (one observer flush). Args: K, rows.
void BM_HessianAccumulate(benchmark::State& state) {
  const int64_t k = state.range(0), rows = state.range(1);
  const auto x = Normal(size_t(k * rows), 1);
  slm::quant::InputHessian ih;
  ih.k = k;
  ih.h.assign(size_t(k * k), 0.0);
  for (auto _ : state) {
    ih.Accumulate(x.data(), rows);
    benchmark::DoNotOptimize(ih.h.data());
  }
  // Multiply-adds of the upper triangle.
  state.counters["MAC/s"] = benchmark::Counter(double(k) * double(k + 1) / 2 * double(rows) * double(state.iterations()),
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HessianAccumulate)->Args({2048, 64})->Args({8192, 64})->Unit(benchmark::kMillisecond);

// Σ e·H·eᵀ over N weight rows, densely and through the factor of a rank-`rank` H. Args: K, N, rank.
void BM_ErrorEnergy(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1), rank = state.range(2);
  const bool factored = state.range(3) != 0;
  slm::quant::InputHessian ih;
  ih.k = k;
  ih.h.assign(size_t(k * k), 0.0);
  const auto x = Normal(size_t(k * rank), 2);
  ih.Accumulate(x.data(), rank);
  const auto e = Normal(size_t(k * n), 3);
  const auto f = slm::quant::FactorHessian(ih.h.data(), k, k);
  for (auto _ : state) {
    benchmark::DoNotOptimize(factored ? slm::quant::ErrorEnergy(e.data(), n, *f)
                                      : slm::quant::ErrorEnergy(e.data(), n, k, ih.h.data()));
  }
}
BENCHMARK(BM_ErrorEnergy)->Args({2048, 256, 480, 0})->Args({2048, 256, 480, 1})->Unit(benchmark::kMillisecond);

}  // namespace
