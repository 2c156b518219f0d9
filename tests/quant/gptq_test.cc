// GPTQ on synthetic layers: it must beat round-to-nearest on the output error when the inputs
// are correlated, reduce to round-to-nearest when they are not (H = I), be deterministic, and
// the statistics it consumes (H = Σ xᵀx, output SQNR through H) must match direct computation.
#include "quant/gptq.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "quant/calibration_stats.h"
#include "quant/quantize.h"

namespace slm::quant {
namespace {

std::vector<float> Normal(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Rows x = z·A with a mixing A whose columns have decaying scales, plus a few loud channels:
// strongly non-isotropic, correlated inputs as in a transformer's linear layers.
std::vector<float> CorrelatedInputs(int64_t rows, int64_t k, uint32_t seed) {
  const std::vector<float> z = Normal(size_t(rows * k), seed, 1.0f);
  std::vector<float> a = Normal(size_t(k * k), seed + 1, 1.0f / std::sqrt(float(k)));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) a[size_t(i * k + j)] *= std::exp(-3.0f * float(i) / float(k));
  }
  std::vector<float> x(size_t(rows * k), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < k; ++i) {
      const float zi = z[size_t(r * k + i)];
      for (int64_t j = 0; j < k; ++j) x[size_t(r * k + j)] += zi * a[size_t(i * k + j)];
    }
    for (int64_t j = 0; j < k; j += 17) x[size_t(r * k + j)] *= 8.0f;  // outlier channels
  }
  return x;
}

std::vector<double> Hessian(const std::vector<float>& x, int64_t k) {
  InputHessian ih;
  ih.k = k;
  ih.h.assign(size_t(k * k), 0.0);
  ih.Accumulate(x.data(), int64_t(x.size()) / k);
  return ih.h;
}

std::vector<double> Identity(int64_t k) {
  std::vector<double> h(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) h[size_t(i * k + i)] = 1.0;
  return h;
}

// Round to nearest; int4 ranges searched (the default) or min/max.
QuantizedMatrix Rtn(const std::vector<float>& w, int64_t n, int64_t k, const SchemeSpec& s, bool search = true) {
  return s.scheme == Scheme::kInt8 ? QuantizeInt8PerChannel(w.data(), n, k)
                                   : QuantizeInt4Groups(w.data(), n, k, s.group, s.asymmetric, search);
}

const char* kFormats[] = {"int8", "int4-g32", "int4-g32-asym", "int4-g64", "int4-g128-asym"};

// Odd and even K, K over one 256-row panel of H, and calls of more rows than one block (64).
TEST(InputHessianTest, AccumulatesTheSumOfOuterProductsAndAbsoluteValuesOfTheRows) {
  for (const auto [k, rows, first] : {std::array<int64_t, 3>{5, 7, 3}, {1, 3, 1}, {2, 1, 1}, {64, 70, 1},
                                      {33, 140, 69}, {300, 5, 2}}) {
    const auto x = Normal(size_t(rows * k), uint32_t(3 + k), 1.0f);
    InputHessian ih;
    ih.k = k;
    ih.h.assign(size_t(k * k), 0.0);
    ih.Accumulate(x.data(), first);
    ih.Accumulate(x.data() + first * k, rows - first);
    EXPECT_EQ(ih.rows, rows);
    for (int64_t a = 0; a < k; ++a) {
      double abs_sum = 0;
      for (int64_t r = 0; r < rows; ++r) abs_sum += std::fabs(double(x[size_t(r * k + a)]));
      EXPECT_NEAR(ih.abs_sum[size_t(a)], abs_sum, 1e-9 * abs_sum) << "k " << k << " channel " << a;
      for (int64_t b = 0; b < k; ++b) {
        double want = 0, magnitude = 0;
        for (int64_t r = 0; r < rows; ++r) {
          want += double(x[size_t(r * k + a)]) * x[size_t(r * k + b)];
          magnitude += std::fabs(double(x[size_t(r * k + a)]) * x[size_t(r * k + b)]);
        }
        // Blocks of 64 rows are summed in f32 (the product kernel), then in f64.
        EXPECT_NEAR(ih.h[size_t(a * k + b)], want, 1e-6 * magnitude) << "k " << k << " at " << a << "," << b;
        EXPECT_NEAR(ih.h[size_t(a * k + b)], ih.h[size_t(b * k + a)], 1e-6 * magnitude) << "k " << k << " at " << a << "," << b;
      }
    }
  }
}

TEST(OutputSqnrTest, EqualsTheSqnrOfTheLayerOutputsComputedDirectly) {
  const int64_t n = 6, k = 32, rows = 40;
  const auto w = Normal(size_t(n * k), 4, 0.05f);
  const auto x = CorrelatedInputs(rows, k, 5);
  const auto wq = Dequantize(QuantizeInt4Groups(w.data(), n, k, 32, false));
  std::vector<float> y(size_t(rows * n)), yq(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < n; ++o) {
      double s = 0, sq = 0;
      for (int64_t i = 0; i < k; ++i) {
        s += double(x[size_t(r * k + i)]) * w[size_t(o * k + i)];
        sq += double(x[size_t(r * k + i)]) * wq[size_t(o * k + i)];
      }
      y[size_t(r * n + o)] = float(s);
      yq[size_t(r * n + o)] = float(sq);
    }
  }
  const double direct = SqnrDb(y.data(), yq.data(), y.size());
  EXPECT_NEAR(OutputSqnrDb(w.data(), wq.data(), n, k, Hessian(x, k).data()), direct, 0.05);
}

TEST(GptqTest, BeatsRoundToNearestOnOutputSqnrWithCorrelatedInputs) {
  const int64_t n = 48, k = 256, rows = 1024;
  const auto w = Normal(size_t(n * k), 7, 0.05f);
  const auto x = CorrelatedInputs(rows, k, 8);
  const auto h = Hessian(x, k);
  for (const char* text : kFormats) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool act_order = variant == 1, clip_search = variant == 2;
      SCOPED_TRACE(std::string(text) + (act_order ? " act_order" : "") + (clip_search ? " clip_search" : ""));
      const SchemeSpec s = *ParseScheme(text);
      GptqOptions opt;
      opt.act_order = act_order;
      opt.clip_search = clip_search;
      auto g = GptqQuantize(w.data(), n, k, h.data(), s, opt);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      const double rtn = OutputSqnrDb(w.data(), Dequantize(Rtn(w, n, k, s)).data(), n, k, h.data());
      const double gptq = OutputSqnrDb(w.data(), Dequantize(*g).data(), n, k, h.data());
      EXPECT_GT(gptq, rtn + 3.0) << "rtn " << rtn << " dB, gptq " << gptq << " dB";
    }
  }
}

TEST(GptqTest, IdenticalInputsGiveIdenticalBytes) {
  const int64_t n = 16, k = 128;
  const auto w = Normal(size_t(n * k), 9, 0.05f);
  const auto h = Hessian(CorrelatedInputs(200, k, 10), k);
  for (const char* text : kFormats) {
    const SchemeSpec s = *ParseScheme(text);
    auto a = GptqQuantize(w.data(), n, k, h.data(), s, {});
    auto b = GptqQuantize(w.data(), n, k, h.data(), s, {});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->q, b->q) << text;
    EXPECT_EQ(a->scales, b->scales) << text;
    EXPECT_EQ(a->offsets, b->offsets) << text;
  }
}

TEST(GptqTest, WithIdentityHessianEqualsRoundToNearestByteForByte) {
  const int64_t n = 9, k = 128;
  const auto w = Normal(size_t(n * k), 11, 0.05f);
  for (const char* text : kFormats) {
    for (bool act_order : {false, true}) {
      // The int4 range search is shared: with H = I its weights are all 1, i.e. RTN's search.
      for (bool clip_search : {false, true}) {
        SCOPED_TRACE(std::string(text) + (act_order ? " act_order" : "") + (clip_search ? " clip_search" : ""));
        const SchemeSpec s = *ParseScheme(text);
        GptqOptions opt;
        opt.act_order = act_order;
        opt.clip_search = clip_search;
        auto g = GptqQuantize(w.data(), n, k, Identity(k).data(), s, opt);
        ASSERT_TRUE(g.ok());
        const QuantizedMatrix r = Rtn(w, n, k, s, clip_search);
        EXPECT_EQ(g->q, r.q);
        EXPECT_EQ(g->scales, r.scales);
        EXPECT_EQ(g->offsets, r.offsets);
      }
    }
  }
}

TEST(GptqTest, InputsNeverActivatedKeepTheirRoundToNearestValues) {
  // An all-zero H (no calibration activity): every input is dead, nothing is compensated.
  const int64_t n = 4, k = 64;
  const auto w = Normal(size_t(n * k), 12, 0.05f);
  const std::vector<double> zero(size_t(k * k), 0.0);
  for (bool clip_search : {false, true}) {
    GptqOptions opt;
    opt.clip_search = clip_search;  // dead groups: no activation weights → RTN's own search
    auto g = GptqQuantize(w.data(), n, k, zero.data(), *ParseScheme("int4-g32"), opt);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->q, QuantizeInt4Groups(w.data(), n, k, 32, false, clip_search).q) << clip_search;
  }
}

TEST(GptqTest, RejectsAGroupThatDoesNotDivideKAndNonWeightFormatsWithAMessage) {
  const int64_t n = 2, k = 48;
  const auto w = Normal(size_t(n * k), 13, 0.05f);
  auto bad = GptqQuantize(w.data(), n, k, Identity(k).data(), *ParseScheme("int4-g32"), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("K=48"), std::string::npos) << bad.status().message();
  auto none = GptqQuantize(w.data(), n, k, Identity(k).data(), *ParseScheme("none"), {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("none"), std::string::npos);
}

TEST(QuantizeGraphsGptqTest, MethodGptqWithoutCalibrationIsAnErrorNamingTheFix) {
  std::vector<graph::Graph> graphs;
  QuantConfig cfg;
  cfg.linear = *ParseScheme("int8");
  cfg.method = Method::kGptq;
  auto r = QuantizeGraphs(graphs, cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gptq"), std::string::npos);
  EXPECT_NE(r.status().message().find("calibration"), std::string::npos);
  EXPECT_FALSE(ParseMethod("smoothquant").ok());
  EXPECT_EQ(*ParseMethod("gptq"), Method::kGptq);
}

}  // namespace
}  // namespace slm::quant
