// Every model in ../shared/models passes the conformance suite (every path against the
// one-token path: logits within 1e-4 of the largest |logit|, identical greedy tokens), with
// several prefill steps, with state outputs, and in full-length sliding mode where the model has
// sliding layers. The steps reach 32 rows, where the f32 matmuls switch to the panel GEMM on
// AVX-512 (16 rows on AVX2, 8 on NEON): its summation order is not the one-token path's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "conformance_util.h"
#include "e2e/artifacts.h"

namespace slm::testing {
namespace {

class Conformance : public ::testing::TestWithParam<ConformanceVariant> {};

TEST_P(Conformance, EveryPathMatchesTheOneTokenPath) {
  const ConformanceVariant& c = GetParam();
  model::CompileOptions opt;
  opt.prefill_steps = {4, 16, 32};
  opt.max_context_len = 48;
  opt.state_outputs = c.state_outputs;
  opt.sliding_mode = c.sliding_mode();
  const std::string path = MakeTempDir("conformance") + "/model.slm";
  auto report = model::CompileCheckpoint(SharedDir() + "/models/" + c.model, path, opt);
  if (!report.ok() && report.status().code() == ErrorCode::kUnsupported) {
    GTEST_SKIP() << c.model << ": the compiler reports the architecture as unsupported: " << report.status().ToString();
  }
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectConformancePasses(path);
}

INSTANTIATE_TEST_SUITE_P(AllModels, Conformance, ::testing::ValuesIn(AllConformanceVariants()),
                         ConformanceVariantName);

TEST(ConformanceCli, PrintsATableAndExitsZeroWhenEverythingPasses) {
  const std::string path = CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 40);
  CommandResult r = RunCli("conformance " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("prefill len=17 tail=auto"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 failed"), std::string::npos) << r.out;
  CommandResult j = RunCli("conformance --json " + path);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  nlohmann::json parsed = nlohmann::json::parse(j.out);
  EXPECT_TRUE(parsed["passed"].get<bool>());
  EXPECT_EQ(parsed["failed"].get<int>(), 0);
}

TEST(ConformanceCli, MissingArtifactIsAOneLineError) {
  CommandResult r = RunCli("conformance /nonexistent/model.slm");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("staticlm: error:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace slm::testing
