#include "quant/hessian_factor.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace slm::quant {
namespace {

// Σ_r row_energy(r), each row on some thread, summed in row order.
template <typename RowEnergy>
double SumRows(int64_t n, RowEnergy&& row_energy) {
  std::vector<double> per_row(static_cast<size_t>(n), 0.0);
  ThreadPool::Default().ParallelFor(n, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) per_row[size_t(r)] = row_energy(r);
  });
  double total = 0;
  for (double v : per_row) total += v;
  return total;
}

}  // namespace

std::optional<LowRankFactor> FactorHessian(const double* h, int64_t k, int64_t max_rank) {
  LowRankFactor f;
  f.k = k;
  std::vector<double> residual(static_cast<size_t>(k));
  double top = 0;
  for (int64_t i = 0; i < k; ++i) top = std::max(top, residual[size_t(i)] = h[i * k + i]);
  // H is summed in f32 within blocks of rows (calibration_stats.h), so directions below ~1e-7
  // of its largest diagonal are rounding noise (possibly negative): stop at 1e-6.
  const double tolerance = 1e-6 * top;
  std::vector<bool> pivoted(static_cast<size_t>(k), false);
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = -1;
    for (int64_t i = 0; i < k; ++i) {
      if (!pivoted[size_t(i)] && (p < 0 || residual[size_t(i)] > residual[size_t(p)])) p = i;
    }
    if (p < 0 || !(residual[size_t(p)] > tolerance)) break;
    if (f.rank == max_rank) return std::nullopt;
    pivoted[size_t(p)] = true;
    const double root = std::sqrt(residual[size_t(p)]);
    std::vector<double> column(h + p * k, h + (p + 1) * k);  // row p = column p: H is symmetric
    for (int64_t c = 0; c < j; ++c) {
      const double* fc = f.columns.data() + c * k;
      const double fcp = fc[p];
      for (int64_t i = 0; i < k; ++i) column[size_t(i)] -= fc[i] * fcp;
    }
    for (int64_t i = 0; i < k; ++i) {
      // Pivoted rows are fully explained by the earlier columns (exactly 0 in exact arithmetic).
      column[size_t(i)] = pivoted[size_t(i)] && i != p ? 0.0 : column[size_t(i)] / root;
      if (!pivoted[size_t(i)]) residual[size_t(i)] -= column[size_t(i)] * column[size_t(i)];
    }
    residual[size_t(p)] = 0;
    f.columns.insert(f.columns.end(), column.begin(), column.end());
    ++f.rank;
  }
  f.columns_f32.assign(f.columns.begin(), f.columns.end());
  return f;
}

double ErrorEnergy(const float* e, int64_t n, const LowRankFactor& f) {
  if (f.rank == 0 || n == 0) return 0;
  // e·F [n, rank] in row blocks (the product kernel: ~100× a scalar f64 loop), then the squares.
  constexpr int64_t kRows = 64;
  const int64_t blocks = (n + kRows - 1) / kRows;
  std::vector<double> per_block(static_cast<size_t>(blocks), 0.0);
  std::vector<std::vector<float>> scratch(size_t(ThreadPool::Default().size()));
  ThreadPool::Default().ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1, int thread) {
    std::vector<float>& y = scratch[size_t(thread)];
    y.resize(size_t(kRows * f.rank));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kRows, rows = std::min(n, r0 + kRows) - r0;
      kernels::MatMulF32(e + r0 * f.k, f.columns_f32.data(), nullptr, y.data(), rows, f.k, f.rank);
      double sum = 0;
      for (int64_t i = 0; i < rows * f.rank; ++i) sum += double(y[size_t(i)]) * double(y[size_t(i)]);
      per_block[size_t(b)] = sum;
    }
  });
  double total = 0;
  for (double v : per_block) total += v;
  return total;
}

double ErrorEnergy(const float* e, int64_t n, int64_t k, const double* h) {
  return SumRows(n, [&](int64_t r) {
    const float* er = e + r * k;
    double sum = 0;
    for (int64_t a = 0; a < k; ++a) {
      if (er[a] == 0) continue;
      const double* ha = h + a * k;
      double dot = 0;
      for (int64_t b = 0; b < k; ++b) dot += ha[b] * er[b];
      sum += er[a] * dot;
    }
    return sum;
  });
}

}  // namespace slm::quant
