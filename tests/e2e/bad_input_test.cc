// Bad input through the CLI: each case gives one clear error line and a non-zero exit code,
// never a crash (the suite also runs under AddressSanitizer).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "e2e/artifacts.h"

namespace slm::testing {
namespace {

namespace fs = std::filesystem;

std::string CopyStories() {
  std::string dir = MakeTempDir("ckpt");
  for (const auto& e : fs::directory_iterator(SharedDir() + "/models/stories260K")) {
    fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
    fs::permissions(dir + "/" + e.path().filename().string(), fs::perms::owner_read | fs::perms::owner_write);
  }
  return dir;
}

TEST(BadInput, MissingConfigJson) {
  std::string dir = CopyStories();
  fs::remove(dir + "/config.json");
  ExpectOneLineError(RunCli("compile " + dir + " -o " + dir + "/m.slm"), "config.json");
  EXPECT_FALSE(fs::exists(dir + "/m.slm"));
}

TEST(BadInput, UnsupportedArchitecture) {
  std::string dir = CopyStories();
  nlohmann::json cfg = ReadJson(dir + "/config.json");
  cfg["architectures"] = {"MambaForCausalLM"};
  WriteFile(dir + "/config.json", cfg.dump());
  ExpectOneLineError(RunCli("compile " + dir + " -o " + dir + "/m.slm"), "MambaForCausalLM");
}

TEST(BadInput, MissingTensor) {
  std::string dir = CopyStories();
  auto [header, data] = SplitSafetensors(ReadFile(dir + "/model.safetensors"));
  header.erase("model.layers.2.mlp.up_proj.weight");
  WriteFile(dir + "/model.safetensors", JoinSafetensors(header, data));
  ExpectOneLineError(RunCli("compile " + dir + " -o " + dir + "/m.slm"), "model.layers.2.mlp.up_proj.weight");
}

TEST(BadInput, TruncatedSafetensors) {
  std::string dir = CopyStories();
  std::string bytes = ReadFile(dir + "/model.safetensors");
  WriteFile(dir + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
  ExpectOneLineError(RunCli("compile " + dir + " -o " + dir + "/m.slm"), "model.safetensors");
}

TEST(BadInput, SafetensorsOffsetsThatLie) {
  std::string dir = CopyStories();
  auto [header, data] = SplitSafetensors(ReadFile(dir + "/model.safetensors"));
  header["model.norm.weight"]["data_offsets"] = {0, data.size() + 4096};
  WriteFile(dir + "/model.safetensors", JoinSafetensors(header, data));
  ExpectOneLineError(RunCli("compile " + dir + " -o " + dir + "/m.slm"), "model.norm.weight");
}

TEST(BadInput, TruncatedArtifact) {
  std::string dir = MakeTempDir("bad");
  std::string bytes = ReadFile(CompiledArtifact(SharedDir() + "/models/stories260K"));
  for (size_t cut : {size_t{0}, size_t{10}, size_t{64}, size_t{200}, bytes.size() / 2, bytes.size() - 1}) {
    WriteFile(dir + "/cut.slm", bytes.substr(0, cut));
    ExpectOneLineError(RunCli("run " + dir + "/cut.slm --prompt-ids 1 -n 4"), "cut.slm");
    ExpectOneLineError(RunCli("inspect " + dir + "/cut.slm"), "cut.slm");
  }
}

TEST(BadInput, FlippedBytesInArtifactHeader) {
  std::string dir = MakeTempDir("bad");
  std::string bytes = ReadFile(CompiledArtifact(SharedDir() + "/models/stories260K"));
  for (size_t at : {0, 9, 16, 24, 33, 40, 48, 70, 300}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    WriteFile(dir + "/flip.slm", flipped);
    ExpectOneLineError(RunCli("run " + dir + "/flip.slm --prompt-ids 1 -n 4"), "flip.slm");
  }
}

TEST(BadInput, PromptLongerThanTheContext) {
  std::string artifact = CompiledArtifact(SharedDir() + "/models/stories260K", {8}, 16);
  std::string ids = "1";
  for (int i = 0; i < 19; ++i) ids += ",100";
  ExpectOneLineError(RunCli("run " + artifact + " --prompt-ids " + ids + " -n 4"), "context");
}

TEST(BadInput, PromptIdOutsideTheVocabulary) {
  std::string artifact = CompiledArtifact(SharedDir() + "/models/stories260K");
  ExpectOneLineError(RunCli("run " + artifact + " --prompt-ids 1,999999 -n 4"), "999999");
}

TEST(BadInput, MissingArtifact) {
  ExpectOneLineError(RunCli("run /nonexistent/model.slm -p hi"), "/nonexistent/model.slm");
}

}  // namespace
}  // namespace slm::testing
