// The compiled artifact: weights stored once and shared by both methods, exact contract
// signatures, and `inspect` output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "e2e/artifacts.h"
#include "io/artifact_reader.h"
#include "io/safetensors.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "runtime/program.h"

namespace slm::testing {
namespace {

TEST(Artifact, EachWeightIsStoredOnce) {
  const std::string ckpt = SharedDir() + "/models/stories260K";
  std::string path = CompiledArtifact(ckpt);
  auto st = io::SafetensorsCheckpoint::OpenDir(ckpt);
  ASSERT_TRUE(st.ok());
  uint64_t weight_bytes = 0;
  for (const std::string& n : st->Names()) weight_bytes += st->Find(n)->nbytes;  // F32 checkpoint
  auto file = io::ArtifactFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  uint64_t metadata_bytes = (*file)->metadata_json().size() + (*file)->tokenizer_bytes().size();
  // Program FlatBuffer (ops, names) and alignment padding are "metadata" too; bound them.
  EXPECT_LE(std::filesystem::file_size(path), 1.02 * weight_bytes + metadata_bytes + 64 * 1024);
}

TEST(Artifact, BothMethodsPointAtTheSameConstantData) {
  auto program = runtime::Program::Load(CompiledArtifact(SharedDir() + "/models/stories260K"));
  ASSERT_TRUE(program.ok());
  auto prefill = (*program)->artifact().LoadMethod("prefill");
  auto decode = (*program)->artifact().LoadMethod("decode");
  ASSERT_TRUE(prefill.ok() && decode.ok());
  std::map<std::string, int32_t> prefill_constants;
  for (const auto& v : prefill->values) {
    if (v.kind == graph::ValueKind::kConstant) prefill_constants[v.name] = v.constant_index;
  }
  int shared = 0;
  for (const auto& v : decode->values) {
    if (v.kind != graph::ValueKind::kConstant) continue;
    ASSERT_TRUE(prefill_constants.count(v.name)) << v.name;
    EXPECT_EQ(prefill_constants[v.name], v.constant_index) << v.name;
    ++shared;
  }
  EXPECT_EQ(shared, static_cast<int>(prefill_constants.size()));
  // Tied embeddings: the embedding and the lm_head are one constant.
  EXPECT_EQ((*program)->artifact().constants().size(), prefill_constants.size());
}

TEST(Inspect, ShowsBothMethodsWithTheContractSignatures) {
  CommandResult r = RunCli("inspect --json " + CompiledArtifact(SharedDir() + "/models/stories260K", {32}, 512));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["methods"].size(), 2u);
  auto find = [&](const std::string& name) {
    for (const auto& m : j["methods"]) if (m["name"] == name) return m;
    return nlohmann::json();
  };
  auto sig = [](const nlohmann::json& list) {
    std::vector<std::string> out;
    for (const auto& v : list) out.push_back(v["name"].get<std::string>() + " " + v["dtype"].get<std::string>() + " " + v["shape"].dump());
    return out;
  };
  std::vector<std::string> prefill_in = {"input_ids int32 [1,32]", "input_pos int32 [1,32]",
                                         "attn_mask.full float32 [1,32,544]", "logits_row int32 [1]"};
  std::vector<std::string> decode_in = {"input_ids int32 [1,1]", "input_pos int32 [1,1]", "attn_mask.full float32 [1,1,513]"};
  for (int i = 0; i < 5; ++i) {
    for (const char* kv : {"k_cache.", "v_cache."}) {
      prefill_in.push_back(kv + std::to_string(i) + " float32 [1,4,512,8]");
      decode_in.push_back(kv + std::to_string(i) + " float32 [1,4,512,8]");
    }
  }
  EXPECT_EQ(sig(find("prefill")["inputs"]), prefill_in);
  EXPECT_EQ(sig(find("decode")["inputs"]), decode_in);
  EXPECT_EQ(sig(find("prefill")["outputs"]), std::vector<std::string>{"logits float32 [1,1,512]"});
  EXPECT_EQ(sig(find("decode")["outputs"]), std::vector<std::string>{"logits float32 [1,1,512]"});
  EXPECT_EQ(j["metadata"]["contract"], "hf_static");
  EXPECT_EQ(j["metadata"]["version"], 1);
  for (const auto& c : j["constants"]) EXPECT_EQ(c["shared_by"].size(), 2u) << c["name"];

  CommandResult text = RunCli("inspect " + CompiledArtifact(SharedDir() + "/models/stories260K", {32}, 512));
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("attn_mask.full"), std::string::npos);
  EXPECT_NE(text.out.find("arena"), std::string::npos);
}

TEST(Cli, RunJsonReportsIdsTextAndStats) {
  CommandResult r = RunCli("run " + CompiledArtifact(SharedDir() + "/models/stories260K") + " --prompt-ids 1 -n 8 --json --logits");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json::array({1}));
  EXPECT_EQ(j["generated_ids"].size(), 8u);
  EXPECT_EQ(j["logits"].size(), 8u);
  EXPECT_EQ(j["logits"][0].size(), 512u);
  EXPECT_TRUE(j["stats"].contains("ttft_ms"));
  EXPECT_TRUE(j["text"].is_string());
}

TEST(Cli, RunStreamsTextAndPrintsStats) {
  CommandResult r = RunCli("run " + CompiledArtifact(SharedDir() + "/models/stories260K") + " -p 'Once upon a time' -n 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), 40u);
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* sub : {"compile", "run", "inspect"}) {
    CommandResult r = RunCli(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub << ": " << r.out;
  }
}

// The "simd_target" bench reports: the Highway target, then "+" and the intrinsics bodies that run
// beside it (kernels::ActiveIntrinsicBodies), if any. Under an explicit NEON target the Arm
// dot-product bodies still run where the CPU has them ("NEON+DOTPROD+I8MM"), as the AVX-VNNI
// bodies do under AVX2 on x86; under SCALAR none does.
::testing::AssertionResult RanTarget(const nlohmann::json& bench, const std::string& target) {
  const std::string ran = bench["simd_target"].get<std::string>();
  if (ran == target || ran.rfind(target + "+", 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "bench ran " << ran << ", not " << target << " (+ bodies)";
}

// --simd-target (or $SLM_SIMD_TARGET, which the option overrides) picks the kernels' SIMD target
// for the whole command, case-insensitively; bench reports the one that ran. Here: the last
// target this CPU supports in this build (SCALAR on x86, NEON on Arm), so it differs from the
// default wherever there are two.
TEST(Cli, SimdTargetOptionOrEnvironmentPicksTheKernelsTargetAndUnknownNamesAreRejected) {
  const std::string art = CompiledArtifact(SharedDir() + "/models/stories260K");
  const std::string worst = hwy::TargetName(kernels::SupportedSimdTargets().back());
  std::string lower = worst;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const std::string bench = " bench " + art + " -p 8 -n 4 -r 1 -t 1 --json";

  CommandResult r = RunCli("--simd-target " + lower + bench);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(RanTarget(nlohmann::json::parse(r.out), worst));

  ASSERT_EQ(setenv("SLM_SIMD_TARGET", lower.c_str(), 1), 0);
  r = RunCli(bench.substr(1));
  CommandResult overridden = RunCli("--simd-target best" + bench);
  unsetenv("SLM_SIMD_TARGET");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(RanTarget(nlohmann::json::parse(r.out), worst));
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  const std::string best = hwy::TargetName(kernels::SupportedSimdTargets().front());
  EXPECT_TRUE(RanTarget(nlohmann::json::parse(overridden.out), best));

  r = RunCli("--simd-target AVX9 inspect " + art);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'AVX9'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(worst), std::string::npos) << "lists the supported targets: " << r.err;
}

}  // namespace
}  // namespace slm::testing
