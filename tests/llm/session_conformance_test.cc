// The conformance library on a small artifact: every case passes, the table and JSON report them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llm/conformance.h"
#include "llm/session_test_util.h"

namespace slm::testing {
namespace {

TEST(SessionConformance, SmallArtifactPassesEveryCaseAndReportsThem) {
  auto report = llm::RunConformance(SmallArtifact());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed()) << report->ToTable();
  std::set<std::string> kinds;
  for (const auto& c : report->cases) kinds.insert(c.name.substr(0, c.name.find(' ')));
  for (const char* k : {"prefill", "greedy", "near-context", "reset", "fork", "snapshot", "prefix", "rewind"}) {
    EXPECT_TRUE(kinds.count(k)) << k;
  }
  const std::string table = report->ToTable();
  EXPECT_NE(table.find("prefill len=17 tail=auto"), std::string::npos) << table;
  EXPECT_NE(table.find(" 0 failed"), std::string::npos);
  nlohmann::json j = report->ToJson();
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["cases"].size(), report->cases.size());
}

TEST(SessionConformance, StateOutputsArtifactIsTokenIdenticalToInPlace) {
  model::CompileOptions opt;
  opt.prefill_steps = {4, 16};
  opt.max_context_len = 64;
  opt.state_outputs = true;
  const std::string path = MakeTempDir("state-outputs") + "/m.slm";
  ASSERT_TRUE(model::CompileCheckpoint(SharedDir() + "/models/stories260K", path, opt).ok());
  auto with = OpenSession(path);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_EQ((*with)->metadata().state_outputs.size(), 2 * (*with)->metadata().layers.size());
  EXPECT_EQ((*with)->metadata().state_outputs[3].output, "v_cache_out.1");
  EXPECT_EQ((*with)->metadata().state_outputs[3].binds, "v_cache.1");
  auto without = OpenSession(SmallArtifact());
  ASSERT_TRUE(without.ok());
  std::vector<int32_t> seq = TestTokens(23, 512);
  std::vector<float> a(512), b(512);
  std::vector<int32_t> ta, tb;
  ASSERT_TRUE((*with)->Feed(seq, a).ok());
  ASSERT_TRUE((*without)->Feed(seq, b).ok());
  for (int k = 0; k < 12; ++k) {
    ta.push_back(static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin()));
    tb.push_back(static_cast<int32_t>(std::max_element(b.begin(), b.end()) - b.begin()));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "step " << k;
    ASSERT_TRUE((*with)->Feed(std::span<const int32_t>(&ta.back(), 1), a).ok());
    ASSERT_TRUE((*without)->Feed(std::span<const int32_t>(&tb.back(), 1), b).ok());
  }
  EXPECT_EQ(ta, tb);
  auto report = llm::RunConformance(path);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->passed()) << report->ToTable();
}

}  // namespace
}  // namespace slm::testing
