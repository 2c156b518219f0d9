// The conformance sweep shared by tests/e2e/conformance_test.cc (f32 caches) and
// tests/llm/kv_int8_test.cc (int8 caches): which (model, compile option) variants run, their
// test names, and the check that a compiled artifact passes the hf_static conformance suite.
// Header-only: each test binary compiles only its own folder's .cc files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/conformance.h"
#include "model/graph_builder.h"
#include "test_util.h"

namespace slm::testing {

struct ConformanceVariant {
  std::string model;  // directory under ../shared/models
  bool state_outputs = false;
  bool full_length_sliding = false;

  model::SlidingMode sliding_mode() const {
    return full_length_sliding ? model::SlidingMode::kFullLength : model::SlidingMode::kRing;
  }
};

inline std::string ConformanceVariantName(const ::testing::TestParamInfo<ConformanceVariant>& info) {
  std::string n = info.param.model;
  std::replace(n.begin(), n.end(), '/', '_');
  if (info.param.state_outputs) n += "_state_outputs";
  if (info.param.full_length_sliding) n += "_full_length_sliding";
  return n;
}

// stories260K with and without state outputs, every model under models/zoo, and full-length
// sliding mode for the zoo models whose config has sliding layers.
inline std::vector<ConformanceVariant> AllConformanceVariants() {
  std::vector<ConformanceVariant> v = {{"stories260K"}, {"stories260K", true}};
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

// The artifact at `path` passes the conformance suite (every path against its own one-token
// path) on more than 40 cases.
inline void ExpectConformancePasses(const std::string& path) {
  auto result = llm::RunConformance(path);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->passed()) << result->ToTable();
  EXPECT_GT(result->cases.size(), 40u);
}

}  // namespace slm::testing
