// Output-error energies Σ_rows e·H·eᵀ of calibration statistics H = Σ xᵀx (K×K) through a
// low-rank factor. H sums the outer products of the calibration rows, so its rank is at most the
// number of rows: with ~500 rows and K = 8192 (a 1B model's down_proj) H = F·Fᵀ with F [K, r ≤ 500]
// and e·H·eᵀ = ‖e·F‖² costs K·r per weight row instead of K².
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace slm::quant {

struct LowRankFactor {
  int64_t k = 0, rank = 0;
  std::vector<double> columns;  // [rank, K]: F's columns, each K long
  std::vector<float> columns_f32;  // the same in f32: the operand of the product kernel
};

// Pivoted Cholesky of h [K, K] (symmetric positive semi-definite, row-major), stopping when the
// largest remaining diagonal is ≤ 1e-6 of the largest diagonal (H's own f32 rounding level).
// O(K·r²). nullopt when the rank exceeds max_rank (the dense form is then cheaper).
std::optional<LowRankFactor> FactorHessian(const double* h, int64_t k, int64_t max_rank);

// Σ_rows e_r·H·e_rᵀ over rows [n, K] of e (f32), split over the default thread pool, the rows
// summed in order in f64 (deterministic for a given thread count). Through the factor (e·F by
// the f32 product kernel, then Σ (e·F)² in f64), or densely from h (f64).
double ErrorEnergy(const float* e, int64_t n, const LowRankFactor& f);
double ErrorEnergy(const float* e, int64_t n, int64_t k, const double* h);

}  // namespace slm::quant
