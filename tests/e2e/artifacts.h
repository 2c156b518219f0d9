// Compiled artifacts for the end-to-end tests, built once per (checkpoint, steps, context).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/runner.h"
#include "model/compiler.h"
#include "test_util.h"

namespace slm::testing {

// The stories260K checkpoint directory (the smallest shared model).
inline std::string Stories() { return SharedDir() + "/models/stories260K"; }

// Splits a safetensors file into (header JSON, data section) and joins them back, so a test can
// edit either one.
inline std::pair<nlohmann::json, std::string> SplitSafetensors(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

inline std::string JoinSafetensors(const nlohmann::json& header, const std::string& data) {
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

inline std::string CompiledArtifact(const std::string& checkpoint_dir, std::vector<int64_t> steps = {32},
                                    int64_t max_context = 0) {
  static std::map<std::string, std::string> cache;
  std::string key = checkpoint_dir + "|" + std::to_string(max_context);
  for (int64_t s : steps) key += "|" + std::to_string(s);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string path = MakeTempDir("artifact") + "/model.slm";
  model::CompileOptions opt;
  opt.prefill_steps = steps;
  opt.max_context_len = max_context;
  auto report = model::CompileCheckpoint(checkpoint_dir, path, opt);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  cache[key] = path;
  return path;
}

inline std::unique_ptr<llm::Runner> LoadRunner(const std::string& path, llm::TailPolicy tail = llm::TailPolicy::kPad) {
  llm::RunnerOptions opt;
  opt.session.tail_policy = tail;
  auto r = llm::Runner::Load(path, opt);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

inline float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace slm::testing
