// Every model in ../shared/models passes the conformance suite (every path against the
// one-token path: logits within 1e-4, identical greedy tokens), with several prefill steps, with
// state outputs, and in full-length sliding mode where the model has sliding layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "e2e/artifacts.h"
#include "llm/conformance.h"

namespace slm::testing {
namespace {

struct Variant {
  std::string model;  // directory under ../shared/models
  bool state_outputs = false;
  bool full_length_sliding = false;
};

std::string VariantName(const ::testing::TestParamInfo<Variant>& info) {
  std::string n = info.param.model;
  std::replace(n.begin(), n.end(), '/', '_');
  if (info.param.state_outputs) n += "_state_outputs";
  if (info.param.full_length_sliding) n += "_full_length_sliding";
  return n;
}

std::vector<Variant> AllVariants() {
  std::vector<Variant> v = {{"stories260K"}, {"stories260K", true}};
  std::vector<std::string> zoo;
  for (const auto& e : std::filesystem::directory_iterator(SharedDir() + "/models/zoo")) {
    if (e.is_directory()) zoo.push_back("zoo/" + e.path().filename().string());
  }
  std::sort(zoo.begin(), zoo.end());
  for (const std::string& z : zoo) {
    v.push_back({z});
    // Full-length sliding mode only differs from the ring for configs with sliding layers.
    nlohmann::json cfg = ReadJson(SharedDir() + "/models/" + z + "/config.json");
    const bool sliding = (cfg.contains("sliding_window") && cfg["sliding_window"].is_number()) || cfg.contains("layer_types");
    if (sliding) v.push_back({z, false, true});
  }
  return v;
}

class Conformance : public ::testing::TestWithParam<Variant> {};

TEST_P(Conformance, EveryPathMatchesTheOneTokenPath) {
  const Variant& c = GetParam();
  model::CompileOptions opt;
  opt.prefill_steps = {4, 16};
  opt.max_context_len = 48;
  opt.state_outputs = c.state_outputs;
  opt.sliding_mode = c.full_length_sliding ? model::SlidingMode::kFullLength : model::SlidingMode::kRing;
  const std::string path = MakeTempDir("conformance") + "/model.slm";
  auto report = model::CompileCheckpoint(SharedDir() + "/models/" + c.model, path, opt);
  if (!report.ok() && report.status().code() == ErrorCode::kUnsupported) {
    GTEST_SKIP() << c.model << ": the compiler reports the architecture as unsupported: " << report.status().ToString();
  }
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto result = llm::RunConformance(path);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->passed()) << result->ToTable();
  EXPECT_GT(result->cases.size(), 40u);
}

INSTANTIATE_TEST_SUITE_P(AllModels, Conformance, ::testing::ValuesIn(AllVariants()), VariantName);

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
