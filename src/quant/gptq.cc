#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "quant/hessian_factor.h"
#include "quant/quant_math.h"

namespace slm::quant {
namespace {

bool IsInt4Format(Scheme s) { return s == Scheme::kInt4 || s == Scheme::k8da4w; }

// In-place lower Cholesky factor of a [k, k] row-major SPD matrix (a = L Lᵀ; the upper
// triangle is left as is). False when a pivot is not positive.
bool CholeskyLower(std::vector<double>& a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    double d = a[size_t(j * k + j)];
    for (int64_t p = 0; p < j; ++p) d -= a[size_t(j * k + p)] * a[size_t(j * k + p)];
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double ljj = std::sqrt(d);
    a[size_t(j * k + j)] = ljj;
    for (int64_t i = j + 1; i < k; ++i) {
      double s = a[size_t(i * k + j)];
      for (int64_t p = 0; p < j; ++p) s -= a[size_t(i * k + p)] * a[size_t(j * k + p)];
      a[size_t(i * k + j)] = s / ljj;
    }
  }
  return true;
}

// U upper [k, k] with U ᵀU = (h)⁻¹, from h SPD. Steps: h = L Lᵀ; M = L⁻¹ (lower);
// h⁻¹ = Mᵀ M; then h⁻¹ = C Cᵀ (Cholesky) and U = Cᵀ.
bool UpperCholeskyOfInverse(const std::vector<double>& h, int64_t k, std::vector<double>* u) {
  std::vector<double> l = h;
  if (!CholeskyLower(l, k)) return false;
  // M = L⁻¹ by forward substitution, column by column.
  std::vector<double> m(size_t(k * k), 0.0);
  for (int64_t c = 0; c < k; ++c) {
    m[size_t(c * k + c)] = 1.0 / l[size_t(c * k + c)];
    for (int64_t i = c + 1; i < k; ++i) {
      double s = 0;
      for (int64_t p = c; p < i; ++p) s += l[size_t(i * k + p)] * m[size_t(p * k + c)];
      m[size_t(i * k + c)] = -s / l[size_t(i * k + i)];
    }
  }
  // hinv = Mᵀ M (symmetric; M lower: (MᵀM)[i][j] = Σ_{p ≥ max(i,j)} M[p][i] M[p][j]).
  std::vector<double> hinv(size_t(k * k));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = i; j < k; ++j) {
      double s = 0;
      for (int64_t p = j; p < k; ++p) s += m[size_t(p * k + i)] * m[size_t(p * k + j)];
      hinv[size_t(i * k + j)] = hinv[size_t(j * k + i)] = s;
    }
  }
  if (!CholeskyLower(hinv, k)) return false;
  u->assign(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j <= i; ++j) (*u)[size_t(j * k + i)] = hinv[size_t(i * k + j)];
  }
  return true;
}

}  // namespace

Result<QuantizedMatrix> GptqQuantize(const float* w, int64_t n, int64_t k, const double* h,
                                     const SchemeSpec& format, const GptqOptions& options) {
  const bool int4 = IsInt4Format(format.scheme);
  const bool int8 = format.scheme == Scheme::kInt8 || format.scheme == Scheme::k8da8w;
  if (!int4 && !int8) return InvalidArgument("gptq: format " + SchemeName(format) + " is not an int8 or int4 weight format");
  if (n <= 0 || k <= 0) return InvalidArgument("gptq: empty matrix [" + std::to_string(n) + ", " + std::to_string(k) + "]");
  const int64_t group = int4 ? format.group : 0;
  if (int4 && (group <= 0 || k % group != 0)) {
    return InvalidArgument("gptq: K=" + std::to_string(k) + " is not a multiple of group " + std::to_string(group));
  }
  if (options.block_size < 1) return InvalidArgument("gptq: block_size " + std::to_string(options.block_size) + ", expected >= 1");
  if (!(options.percdamp >= 0)) return InvalidArgument("gptq: percdamp " + std::to_string(options.percdamp) + ", expected >= 0");
  const bool asym = int4 && format.asymmetric;

  // Column order: identity, or decreasing diag H (stable: ties keep column order).
  std::vector<int64_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (options.act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return h[a * k + a] > h[b * k + b]; });
  }
  // Permuted H; dead inputs (never active) get a unit diagonal so H stays invertible.
  std::vector<double> hp(size_t(k * k));
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) hp[size_t(i * k + j)] = h[perm[size_t(i)] * k + perm[size_t(j)]];
    if (hp[size_t(i * k + i)] == 0) hp[size_t(i * k + i)] = 1;
    mean_diag += hp[size_t(i * k + i)];
  }
  mean_diag /= double(k);
  std::vector<double> u;
  double damp = options.percdamp * mean_diag;
  bool ok = false;
  for (int attempt = 0; attempt < 6 && !ok; ++attempt) {
    std::vector<double> damped = hp;
    for (int64_t i = 0; i < k; ++i) damped[size_t(i * k + i)] += damp;
    ok = UpperCholeskyOfInverse(damped, k, &u);
    if (!ok) damp = damp > 0 ? damp * 10 : 1e-6 * mean_diag;
  }
  if (!ok) return FailedPrecondition("gptq: the calibration Hessian [" + std::to_string(k) + ", " + std::to_string(k) + "] is not positive definite even with dampening " + std::to_string(damp));

  // Working copy: wp[r][j] = w[r][perm[j]] in f64.
  std::vector<double> wp(size_t(n * k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) wp[size_t(r * k + j)] = w[r * k + perm[size_t(j)]];
  }

  QuantizedMatrix m;
  m.bits = int4 ? 4 : 8;
  m.n = n;
  m.k = k;
  m.group = group;
  const int64_t groups = int4 ? k / group : 0;
  if (int4) {
    m.q.assign(size_t(n * k / 2), 0);
    m.scales.assign(size_t(n * groups), 0.0f);
    if (asym) m.offsets.assign(size_t(n * groups), 0.0f);
  } else {
    m.q.assign(size_t(n * k), 0);
    m.scales.resize(size_t(n));
    for (int64_t r = 0; r < n; ++r) m.scales[size_t(r)] = detail::Int8Scale(w + r * k, k);
  }
  std::vector<detail::Int4Params> params(size_t(n * groups));
  // int4 group parameters; with clip_search, the range search of round to nearest with each
  // value's squared error weighted by its input's energy diag H (with H = I: RTN's search).
  // A group whose inputs the calibration never activated (diag H all 0) has no preference:
  // it takes RTN's unweighted search, like its values (see gptq.h).
  std::vector<double> importance(size_t(std::max<int64_t>(group, 1)));
  auto set_group = [&](int64_t r, int64_t g, const float* values) {
    detail::Int4Params p;
    if (options.clip_search) {
      double total = 0;
      for (int64_t t = 0; t < group; ++t) {
        const int64_t c = g * group + t;
        total += importance[size_t(t)] = h[c * k + c];
      }
      p = detail::Int4SearchGroupParams(values, group, asym, total > 0 ? importance.data() : nullptr);
    } else {
      p = detail::Int4GroupParams(values, group, asym);
    }
    params[size_t(r * groups + g)] = p;
    m.scales[size_t(r * groups + g)] = p.scale;
    if (asym) m.offsets[size_t(r * groups + g)] = p.offset;
  };
  // act_order + groups: static groups from the original weights.
  if (int4 && options.act_order) {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g = 0; g < groups; ++g) set_group(r, g, w + r * k + g * group);
    }
  }

  // int4: blocks of whole groups, so a group's parameters see every update before it.
  const int64_t bs = int4 ? std::max(group, options.block_size / group * group) : options.block_size;
  std::vector<double> err(size_t(n * bs));  // [N, block] scaled errors of the current block
  std::vector<float> gvals(size_t(std::max<int64_t>(group, 1)));
  for (int64_t i1 = 0; i1 < k; i1 += bs) {
    const int64_t i2 = std::min(i1 + bs, k), count = i2 - i1;
    for (int64_t j = i1; j < i2; ++j) {
      const int64_t col = perm[size_t(j)];  // original column
      const double d = u[size_t(j * k + j)];
      // Without act_order j == col: a group starts here; its parameters come from the row's
      // current (error-compensated) values of the group's columns.
      const bool group_starts = int4 && !options.act_order && col % group == 0;
      for (int64_t r = 0; r < n; ++r) {
        double* row = wp.data() + r * k;
        if (group_starts) {
          for (int64_t t = 0; t < group; ++t) gvals[size_t(t)] = float(row[j + t]);
          set_group(r, col / group, gvals.data());
        }
        const float x = float(row[j]);
        float deq;
        if (int4) {
          const detail::Int4Params& p = params[size_t(r * groups + col / group)];
          const int q = detail::Int4Code(x, p, asym);
          detail::SetQ4(m.q.data() + r * (k / 2), col, q);
          deq = detail::Int4Value(q, p, asym);
        } else {
          const float s = m.scales[size_t(r)];
          const int q = detail::Int8Code(x, s);
          m.q[size_t(r * k + col)] = uint8_t(int8_t(q));
          deq = detail::Int8Value(q, s);
        }
        const double e = (row[j] - double(deq)) / d;
        err[size_t(r * bs + (j - i1))] = e;
        // Compensate within the block now; the columns after it get the batched update below.
        const double* uj = u.data() + j * k;
        for (int64_t t = j + 1; t < i2; ++t) row[t] -= e * uj[t];
      }
    }
    // Lazy batch update: W[:, i2:] -= Err · U[i1:i2, i2:].
    if (i2 < k) {
      for (int64_t r = 0; r < n; ++r) {
        double* row = wp.data() + r * k;
        for (int64_t c = 0; c < count; ++c) {
          const double e = err[size_t(r * bs + c)];
          if (e == 0) continue;
          const double* uc = u.data() + (i1 + c) * k;
          for (int64_t t = i2; t < k; ++t) row[t] -= e * uc[t];
        }
      }
    }
  }
  return m;
}

double OutputSqnrDb(const float* w, const float* w_hat, int64_t n, int64_t k, const double* h) {
  std::vector<float> e(static_cast<size_t>(n * k));
  for (size_t i = 0; i < e.size(); ++i) e[i] = w[i] - w_hat[i];
  // Through a low-rank factor when H's rank (≤ calibration rows) is at most K/2: cheaper than
  // the dense K² per row from there on.
  const std::optional<LowRankFactor> f = FactorHessian(h, k, k / 2);
  const double sig = f ? ErrorEnergy(w, n, *f) : ErrorEnergy(w, n, k, h);
  const double noise = f ? ErrorEnergy(e.data(), n, *f) : ErrorEnergy(e.data(), n, k, h);
  if (noise <= 0) return std::numeric_limits<double>::infinity();
  if (sig <= 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sig / noise);
}

}  // namespace slm::quant
