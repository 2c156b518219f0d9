// The quantization stage's building blocks and graph rewrite: scheme parsing, the int8 / int4
// formats (error bounds, packing), and QuantizeGraphs on small hand-built graphs.
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>

#include "kernels/quant_kernels.h"
#include "quant/quant_math.h"
#include "runtime/op_checks.h"

namespace slm::quant {
namespace {

using graph::Graph;
using graph::OpKind;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(ParseSchemeTest, AcceptsEverySchemeWithGroupAndAsymmetry) {
  EXPECT_EQ(ParseScheme("int8")->scheme, Scheme::kInt8);
  EXPECT_EQ(ParseScheme("none")->scheme, Scheme::kNone);
  auto s = ParseScheme("int4-g64-asym");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->scheme, Scheme::kInt4);
  EXPECT_EQ(s->group, 64);
  EXPECT_TRUE(s->asymmetric);
  EXPECT_EQ(SchemeName(*s), "int4-g64-asym");
  EXPECT_EQ(SchemeName(*ParseScheme("8da4w")), "8da4w-g32");
  EXPECT_EQ(ParseScheme("8da8w")->scheme, Scheme::k8da8w);
}

TEST(ParseSchemeTest, RejectsUnknownNamesBadGroupsAndAsymmetricInt8WithAMessage) {
  auto bad = ParseScheme("int3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("int3"), std::string::npos);
  EXPECT_FALSE(ParseScheme("int4-g48").ok());
  EXPECT_FALSE(ParseScheme("int8-asym").ok());
  EXPECT_FALSE(ParseScheme("int4-x").ok());
  EXPECT_FALSE(ParseOverride("noequals").ok());
  EXPECT_FALSE(ParseOverride("re:([=int8").ok());
  auto o = ParseOverride("*.down_proj.weight=int8");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->first, "*.down_proj.weight");
}

TEST(QuantFormatTest, Int8PerChannelErrorIsAtMostHalfAStep) {
  const int64_t n = 7, k = 45;
  const auto w = Random(size_t(n * k), 1);
  const QuantizedMatrix m = QuantizeInt8PerChannel(w.data(), n, k);
  const auto d = Dequantize(m);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_LE(std::fabs(d[size_t(r * k + i)] - w[size_t(r * k + i)]), m.scales[size_t(r)] * 0.5001f);
    }
  }
  EXPECT_GT(SqnrDb(w.data(), d.data(), w.size()), 35.0);
}

TEST(QuantFormatTest, Int4GroupsStayWithinOneStepAndPackTwoPerByteInTheKernelLayout) {
  const int64_t n = 3, k = 128;
  for (bool asym : {false, true}) {
    for (int64_t g : {32, 64, 128}) {
      const auto w = Random(size_t(n * k), uint32_t(g) + asym);
      // Min/max ranges (no search): every value within half a step (one when +8 clips).
      const QuantizedMatrix m = QuantizeInt4Groups(w.data(), n, k, g, asym, /*search_range=*/false);
      ASSERT_EQ(m.q.size(), size_t(n * k / 2));
      ASSERT_EQ(m.scales.size(), size_t(n * k / g));
      ASSERT_EQ(m.offsets.size(), asym ? size_t(n * k / g) : 0u);
      const auto d = Dequantize(m);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t i = 0; i < k; ++i) {
          const float step = std::fabs(m.scales[size_t(r * (k / g) + i / g)]);
          // Round to nearest: half a step; symmetric clips +8 to +7: one step at most.
          EXPECT_LE(std::fabs(d[size_t(r * k + i)] - w[size_t(r * k + i)]), step * (asym ? 0.5001f : 1.0001f))
              << "g " << g << " asym " << asym << " r " << r << " i " << i;
        }
      }
      EXPECT_GT(SqnrDb(w.data(), d.data(), w.size()), 15.0);
      // The searched ranges (the default) never lose to min/max over the matrix.
      const auto searched = Dequantize(QuantizeInt4Groups(w.data(), n, k, g, asym));
      EXPECT_GE(SqnrDb(w.data(), searched.data(), w.size()), SqnrDb(w.data(), d.data(), w.size()));
    }
  }
  // Layout: byte j of a 32-block holds k = j (low nibble) and k = j + 16 (high nibble).
  std::vector<float> ramp(32);
  for (int i = 0; i < 32; ++i) ramp[size_t(i)] = float(i) - 16.0f;  // peak -16 → scale 2
  const QuantizedMatrix m = QuantizeInt4Groups(ramp.data(), 1, 32, 32, false, /*search_range=*/false);
  EXPECT_FLOAT_EQ(m.scales[0], 2.0f);
  EXPECT_EQ(kernels::Q4At(m.q.data(), 0), 0);   // -16 / 2 + 8
  EXPECT_EQ(m.q[0] & 0x0F, 0);
  EXPECT_EQ(m.q[0] >> 4, 8);                    // k = 16: 0 / 2 + 8
  EXPECT_EQ(kernels::Q4At(m.q.data(), 31), 15); // 15 / 2 = 7.5 → 8 (ties to even) + 8 → clipped 15
}

TEST(QuantMathTest, RoundHalfEvenEqualsNearbyintOnHalvesAndRandomValues) {
  for (int i = -4000; i <= 4000; ++i) {
    const float x = float(i) * 0.25f;  // every half and quarter in [-1000, 1000]
    EXPECT_EQ(detail::RoundHalfEven(x), std::nearbyint(x)) << x;
  }
  for (float x : Random(10000, 77)) EXPECT_EQ(detail::RoundHalfEven(x * 300.0f), std::nearbyint(x * 300.0f)) << x;
}

// One outlier sets the min/max step for the whole group: 31 values of sd 0.01 (largest 0.028)
// and one at 0.035.
// (An outlier far larger than that is worth keeping: clipping it would cost more than the finer
// step saves, and the search keeps min/max.)
std::vector<float> GroupWithOneOutlier() {
  std::vector<float> g = Random(32, 21);
  for (float& v : g) v *= 0.2f;  // sd 0.01
  g[7] = 0.035f;
  return g;
}

TEST(Int4RangeSearchTest, AGroupWithOneOutlierGetsAClippedRangeWithLessSquaredError) {
  const std::vector<float> g = GroupWithOneOutlier();
  for (bool asym : {false, true}) {
    const detail::Int4Params minmax = detail::Int4GroupParams(g.data(), 32, asym);
    const detail::Int4Params searched = detail::Int4SearchGroupParams(g.data(), 32, asym);
    const double e_minmax = detail::Int4GroupError(g.data(), 32, minmax, asym, nullptr);
    const double e_searched = detail::Int4GroupError(g.data(), 32, searched, asym, nullptr);
    EXPECT_LT(e_searched, 0.9 * e_minmax) << "asym " << asym;
    EXPECT_LT(std::fabs(searched.scale), std::fabs(minmax.scale)) << "asym " << asym;  // a finer step
    // The same through the matrix API, and through its bytes (Dequantize = the kernels' rule).
    const auto d_searched = Dequantize(QuantizeInt4Groups(g.data(), 1, 32, 32, asym));
    const auto d_minmax = Dequantize(QuantizeInt4Groups(g.data(), 1, 32, 32, asym, false));
    EXPECT_GT(SqnrDb(g.data(), d_searched.data(), 32), SqnrDb(g.data(), d_minmax.data(), 32)) << "asym " << asym;
  }
}

TEST(Int4RangeSearchTest, ConstantAndZeroGroupsStayExact) {
  for (float c : {0.0f, 0.37f, -1.25f, 3e-5f}) {
    const std::vector<float> g(64, c);
    for (bool asym : {false, true}) {
      const QuantizedMatrix m = QuantizeInt4Groups(g.data(), 1, 64, 32, asym);
      const auto d = Dequantize(m);
      for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(d[i], c) << "c " << c << " asym " << asym << " i " << i;
      EXPECT_TRUE(std::isfinite(m.scales[0]) && std::isfinite(m.scales[1]));
    }
  }
}

TEST(Int4RangeSearchTest, CodesStayInRangeAndOnlyTheClippedExtremesLeaveHalfAStep) {
  // Heavy-tailed rows (an outlier every 29 values) so that many groups are clipped.
  const int64_t n = 4, k = 256;
  std::vector<float> w = Random(size_t(n * k), 31);
  for (size_t i = 0; i < w.size(); i += 29) w[i] *= 12.0f;
  for (bool asym : {false, true}) {
    for (int64_t group : {32, 128}) {
      const QuantizedMatrix m = QuantizeInt4Groups(w.data(), n, k, group, asym);
      const auto d = Dequantize(m);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t g = 0; g < k / group; ++g) {
          const float* wg = w.data() + r * k + g * group;
          const detail::Int4Params p{m.scales[size_t(r * (k / group) + g)],
                                     asym ? m.offsets[size_t(r * (k / group) + g)] : 0.0f};
          ASSERT_TRUE(std::isfinite(p.scale) && p.scale != 0) << r << "," << g;
          if (asym) {
            ASSERT_GT(p.scale, 0.0f);
          }
          // The representable range [lo, hi] of the stored parameters.
          const float a = detail::Int4Value(0, p, asym), b = detail::Int4Value(15, p, asym);
          const float lo = std::min(a, b), hi = std::max(a, b), step = std::fabs(p.scale);
          for (int64_t t = 0; t < group; ++t) {
            const int q = detail::Int4Code(wg[t], p, asym);
            ASSERT_GE(q, 0);
            ASSERT_LE(q, 15);
            const float got = d[size_t(r * k + g * group + t)];
            // s·q + o rounded once or twice: where the compiler contracts one of the two into an
            // FMA (aarch64's baseline has one, x86-64's has not), they differ by an ulp of the
            // terms, which is many ulps of a result near zero.
            EXPECT_NEAR(got, detail::Int4Value(q, p, asym), 4 * FLT_EPSILON * std::max(std::fabs(lo), std::fabs(hi)));
            // Inside the range: round to nearest; outside: clipped to the nearest end.
            const float want = wg[t] < lo ? lo : wg[t] > hi ? hi : wg[t];
            EXPECT_LE(std::fabs(got - want), 0.5001f * step) << "asym " << asym << " g " << group << " r " << r << " t " << t;
          }
        }
      }
    }
  }
}

// A two-matmul graph: x → [q_proj] → h → [lm_head] → logits, plus an embedding tied to lm_head.
Graph TinyGraph(int64_t k, const std::vector<float>& w1, const std::vector<float>& table) {
  Graph g;
  g.name = "decode";
  const int32_t ids = g.AddInput("input_ids", DType::kI32, {1, 1});
  const int32_t emb = g.AddConstant("embed.weight", DType::kF32, {16, k}, graph::MakeF32Constant(table, "table"));
  const int32_t w = g.AddConstant("layers.0.q_proj.weight", DType::kF32, {k, k}, graph::MakeF32Constant(w1, "w1"));
  const int32_t x = g.AddIntermediate("x", DType::kF32, {1, k});
  const int32_t h = g.AddIntermediate("h", DType::kF32, {1, k});
  graph::Value out;
  out.name = "logits";
  out.shape = {1, 1, 16};
  out.kind = graph::ValueKind::kOutput;
  const int32_t logits = g.AddValue(out);
  g.outputs.push_back(logits);
  g.AddOp({OpKind::kEmbedding, {ids, emb}, {x}, {}, {1.0f}, "embed"});
  g.AddOp({OpKind::kMatMul, {x, w}, {h}, {}, {}, "q_proj"});
  g.AddOp({OpKind::kMatMul, {h, emb}, {logits}, {}, {}, "lm_head"});
  return g;
}

int CountConstants(const Graph& g) {
  int n = 0;
  for (const auto& v : g.values) n += v.kind == graph::ValueKind::kConstant;
  return n;
}

TEST(QuantizeGraphsTest, RewritesLinearLayersAndKeepsTheLmHeadByDefault) {
  const int64_t k = 64;
  std::vector<Graph> graphs = {TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3))};
  QuantConfig cfg;
  cfg.linear = *ParseScheme("int4-g32");
  auto report = QuantizeGraphs(graphs, cfg);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Graph& g = graphs[0];
  EXPECT_EQ(g.ops[0].kind, OpKind::kEmbedding);
  EXPECT_EQ(g.ops[1].kind, OpKind::kMatMulQ);
  EXPECT_EQ(g.ops[1].ints, (std::vector<int64_t>{4, 32, 0, 0}));
  EXPECT_EQ(g.ops[2].kind, OpKind::kMatMul);
  EXPECT_EQ(g.FindValue("layers.0.q_proj.weight"), -1);  // the unused f32 copy is gone
  EXPECT_EQ(CountConstants(g), 3);                         // table, int4 q, scales
  ASSERT_EQ(report->tensors.size(), 1u);
  EXPECT_EQ(report->tensors[0].quant_bytes, uint64_t(k * k / 2 + 4 * k * k / 32));
  EXPECT_TRUE(runtime::CheckOpShapes(g).ok()) << runtime::CheckOpShapes(g).ToString();
}

TEST(QuantizeGraphsTest, TiedEmbeddingAndLmHeadShareOneConstantWhenSchemesMatch) {
  const int64_t k = 64;
  std::vector<Graph> graphs = {TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3)),
                               TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3))};
  graphs[1].name = "prefill";
  QuantConfig cfg;
  cfg.linear = *ParseScheme("int8");
  cfg.embeddings = *ParseScheme("int8");
  cfg.quantize_lm_head = true;
  auto report = QuantizeGraphs(graphs, cfg);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  for (const Graph& g : graphs) {
    EXPECT_EQ(g.ops[0].kind, OpKind::kEmbeddingQ);
    EXPECT_EQ(g.ops[2].kind, OpKind::kMatMulQ);
    EXPECT_EQ(g.ops[0].inputs[1], g.ops[2].inputs[1]);  // one int8 table for both uses
    EXPECT_EQ(g.FindValue("embed.weight"), -1);
    EXPECT_TRUE(runtime::CheckOpShapes(g).ok());
  }
  // Quantized once each (two tensors), although two graphs and two uses reference them.
  EXPECT_EQ(report->tensors.size(), 2u);
}

TEST(QuantizeGraphsTest, TiedLmHeadQuantizedAloneKeepsTheF32EmbeddingAndAddsItsOwnCopy) {
  const int64_t k = 64;
  std::vector<Graph> graphs = {TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3))};
  QuantConfig cfg;
  cfg.quantize_lm_head = true;
  cfg.linear = *ParseScheme("int8");
  ASSERT_TRUE(QuantizeGraphs(graphs, cfg).ok());
  const Graph& g = graphs[0];
  EXPECT_EQ(g.ops[0].kind, OpKind::kEmbedding);
  EXPECT_NE(g.FindValue("embed.weight"), -1);
  EXPECT_EQ(g.ops[2].kind, OpKind::kMatMulQ);
}

TEST(QuantizeGraphsTest, OverridesWinAndInt4FallsBackToInt8WhenTheGroupDoesNotDivideK) {
  const int64_t k = 48;  // not a multiple of 32
  std::vector<Graph> graphs = {TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3))};
  QuantConfig cfg;
  cfg.linear = *ParseScheme("8da4w");
  cfg.quantize_lm_head = true;
  cfg.overrides.push_back(*ParseOverride("re:embed\\..*=none"));
  auto report = QuantizeGraphs(graphs, cfg);
  ASSERT_TRUE(report.ok());
  const Graph& g = graphs[0];
  EXPECT_EQ(g.ops[1].kind, OpKind::kMatMulQ);
  EXPECT_EQ(g.ops[1].ints, (std::vector<int64_t>{8, 0, 0, 1}));  // 8da8w
  EXPECT_EQ(g.ops[2].kind, OpKind::kMatMul);                      // override: none
  ASSERT_EQ(report->tensors.size(), 1u);
  EXPECT_EQ(report->tensors[0].scheme, "8da8w");
  EXPECT_NE(report->tensors[0].note.find("K=48"), std::string::npos);
}

TEST(QuantizeGraphsTest, LmHeadWeightOverrideReachesATiedLmHead) {
  const int64_t k = 64;  // TinyGraph's lm_head is the embedding table ("embed.weight")
  std::vector<Graph> graphs = {TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3))};
  QuantConfig cfg;
  cfg.linear = *ParseScheme("int4-g32");
  cfg.overrides.push_back(*ParseOverride("lm_head.weight=int8"));
  auto report = QuantizeGraphs(graphs, cfg);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Graph& g = graphs[0];
  EXPECT_EQ(g.ops[0].kind, OpKind::kEmbedding);  // the lookup keeps the f32 table
  EXPECT_EQ(g.ops[2].kind, OpKind::kMatMulQ);
  EXPECT_EQ(g.ops[2].ints, (std::vector<int64_t>{8, 0, 0, 0}));
}

TEST(QuantizeGraphsTest, AnOverrideThatChoosesNoWeightIsRefusedNamingIt) {
  const int64_t k = 64;
  for (const char* unused : {"*.down_proj.weight=int8", "layers.0.q_proj.weight=int4"}) {
    std::vector<Graph> graphs = {TinyGraph(k, Random(size_t(k * k), 2), Random(size_t(16 * k), 3))};
    QuantConfig cfg;
    cfg.linear = *ParseScheme("int4-g32");
    cfg.overrides.push_back(*ParseOverride("layers.*=int8"));  // shadows the second case
    cfg.overrides.push_back(*ParseOverride(unused));
    auto r = QuantizeGraphs(graphs, cfg);
    ASSERT_FALSE(r.ok()) << unused;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string(unused).substr(0, std::string(unused).find('='))),
              std::string::npos)
        << r.status().message();
  }
}

TEST(QuantizeGraphsTest, RefusesDynamicSchemesForEmbeddings) {
  std::vector<Graph> graphs = {TinyGraph(32, Random(32 * 32, 2), Random(16 * 32, 3))};
  QuantConfig cfg;
  cfg.embeddings = *ParseScheme("8da8w");
  auto r = QuantizeGraphs(graphs, cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("embeddings"), std::string::npos);
}

}  // namespace
}  // namespace slm::quant
