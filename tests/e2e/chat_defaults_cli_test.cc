// The CLI side of the chat-ready metadata: `run` generates with the artifact's
// generation_config defaults (flags override them), `inspect` summarises templates and special
// ids, `tokenize --add-special` on the artifact appends EOS when add_eos_token says so.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/compiler.h"
#include "test_util.h"

namespace slm::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Zoo llama with named chat templates, add_eos_token and a generation_config that asks for
// greedy decoding of 5 new tokens with a repetition penalty.
std::string ChatLlamaArtifact() {
  static const std::string path = [] {
    const std::string dir = MakeTempDir("chat-cli-ckpt");
    for (const fs::directory_entry& e : fs::directory_iterator(SharedDir() + "/models/zoo/llama")) {
      fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
    }
    json tok = ReadJson(dir + "/tokenizer_config.json");
    tok["chat_template"] = json::array({{{"name", "default"}, {"template", "{{ messages }}"}},
                                        {{"name", "tool_use"}, {"template", "{{ tools }}"}}});
    tok["add_eos_token"] = true;
    WriteFile(dir + "/tokenizer_config.json", tok.dump());
    WriteFile(dir + "/generation_config.json",
              json{{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", false}, {"max_new_tokens", 5},
                   {"repetition_penalty", 1.2}}.dump());
    const std::string out = MakeTempDir("chat-cli") + "/model.slm";
    model::CompileOptions opt;
    opt.max_context_len = 64;
    opt.prefill_steps = {8};
    auto report = model::CompileCheckpoint(dir, out, opt);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return out;
  }();
  return path;
}

TEST(ChatDefaultsCli, RunTakesMaxNewTokensFromGenerationConfigUnlessGivenOnTheCommandLine) {
  CommandResult d = RunCli("run " + ChatLlamaArtifact() + " --prompt-ids 1,5,9 --ignore-eos --json");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(json::parse(d.out)["generated_ids"].size(), 5u);
  CommandResult n = RunCli("run " + ChatLlamaArtifact() + " --prompt-ids 1,5,9 --ignore-eos --json -n 2");
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(json::parse(n.out)["generated_ids"].size(), 2u);
}

TEST(ChatDefaultsCli, InspectSummarisesTemplatesSpecialIdsAndGenerationDefaults) {
  CommandResult r = RunCli("inspect " + ChatLlamaArtifact());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pad_id null"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("add_eos true (appends [2])"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chat_templates[tool_use]: 11 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"max_new_tokens\":5"), std::string::npos) << r.out;
}

TEST(ChatDefaultsCli, TokenizeAddSpecialOnTheArtifactAppendsEos) {
  CommandResult r = RunCli("tokenize " + ChatLlamaArtifact() + " --add-special --json hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int> ids = json::parse(r.out)["ids"].get<std::vector<int>>();
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  CommandResult plain = RunCli("tokenize " + ChatLlamaArtifact() + " --json hello");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(json::parse(plain.out)["ids"].size() + 2, ids.size());
}

}  // namespace
}  // namespace slm::testing
