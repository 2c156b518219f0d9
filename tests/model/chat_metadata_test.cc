// Chat-ready metadata: templates (named, .jinja files and their precedence), special ids with
// "no pad token" kept as none, add_bos/add_eos, and generation_config.json, compiled from
// edited zoo checkpoints and read back from the artifact byte for byte.
#include <filesystem>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/artifact_reader.h"
#include "io/contract_metadata.h"
#include "llm/tokenizer_factory.h"
#include "model/compiler.h"
#include "model/model_spec.h"
#include "test_util.h"
#include "zoo_copy.h"

namespace slm::model {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::CopyZooCheckpoint;
using testing::EditJsonFile;

// Templates with bytes a careless copy would change: CRLF, tabs, trailing spaces, non-ASCII,
// a NUL-free but escape-heavy JSON string.
const std::map<std::string, std::string> kNamed = {
    {"default", "{% for m in messages %}<|{{ m['role'] }}|>\r\n{{ m['content'] }}\t \n{% endfor %}"},
    {"tool_use", "{{ tools | tojson }} — outils \"quoted\" \\ back\\slash\n"},
    {"rag", "{% for d in documents %}[{{ loop.index }}] {{ d.text }}  \n{% endfor %}é✓"},
};

json NamedList() {
  json list = json::array();
  for (const auto& [name, text] : kNamed) list.push_back({{"name", name}, {"template", text}});
  return list;
}

std::string Compile(const std::string& dir) {
  const std::string out = testing::MakeTempDir("chat-artifact") + "/model.slm";
  CompileOptions opt;
  opt.max_context_len = 64;
  opt.prefill_steps = {8};
  auto report = CompileCheckpoint(dir, out, opt);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  return out;
}

io::ContractMetadata ReadMetadata(const std::string& artifact, json* raw = nullptr) {
  auto file = io::ArtifactFile::Open(artifact);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return {};
  if (raw) *raw = json::parse((*file)->metadata_json());
  auto meta = io::ContractMetadata::FromJson((*file)->metadata_json());
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  return meta.ok() ? *meta : io::ContractMetadata{};
}

TEST(ChatTemplates, NamedTemplatesAreAllKeptAndDefaultIsThePlainTemplate) {
  ModelSpec s;
  ASSERT_TRUE(ApplyTokenizerConfig(json{{"chat_template", NamedList()}}, "tokenizer_config.json", &s).ok());
  EXPECT_EQ(s.chat_templates, kNamed);
  EXPECT_EQ(s.chat_template, kNamed.at("default"));
  // Named templates without a "default": none is applied by default, all are kept.
  json no_default = json::array({{{"name", "tool_use"}, {"template", "T"}}});
  ASSERT_TRUE(ApplyTokenizerConfig(json{{"chat_template", no_default}}, "tokenizer_config.json", &s).ok());
  EXPECT_EQ(s.chat_template, "");
  EXPECT_EQ(s.chat_templates, (std::map<std::string, std::string>{{"tool_use", "T"}}));
  // A named entry without its template names the field.
  json broken = json::array({{{"name", "rag"}}});
  Status bad = ApplyTokenizerConfig(json{{"chat_template", broken}}, "tokenizer_config.json", &s);
  EXPECT_EQ(bad.code(), ErrorCode::kNotFound);
  EXPECT_THAT(bad.message(), HasSubstr("chat_template[0].template"));
}

TEST(ChatTemplates, JinjaFileTakesPrecedenceOverTokenizerConfig) {
  const std::string dir = CopyZooCheckpoint("llama", "chat-jinja");
  EditJsonFile(dir, "tokenizer_config.json", [](json& c) { c["chat_template"] = NamedList(); });
  testing::WriteFile(dir + "/chat_template.jinja", "FROM FILE {{ messages }}\n");
  auto spec = LoadModelSpec(dir);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // transformers: template files replace the config's entry altogether.
  EXPECT_EQ(spec->chat_template, "FROM FILE {{ messages }}\n");
  EXPECT_TRUE(spec->chat_templates.empty());
}

TEST(ChatTemplates, AdditionalTemplateFilesAreNamedTemplatesReadAsPythonTextMode) {
  const std::string dir = CopyZooCheckpoint("llama", "chat-extra");
  EditJsonFile(dir, "tokenizer_config.json", [](json& c) { c["chat_template"] = "ignored"; });
  testing::WriteFile(dir + "/chat_template.jinja", "line1\r\nline2\rline3\n");
  std::filesystem::create_directory(dir + "/additional_chat_templates");
  testing::WriteFile(dir + "/additional_chat_templates/tool_use.jinja", "tools: {{ tools }}\r\n");
  testing::WriteFile(dir + "/additional_chat_templates/notes.txt", "not a template");
  auto spec = LoadModelSpec(dir);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // open(path, encoding="utf-8").read(): universal newlines.
  EXPECT_EQ(spec->chat_template, "line1\nline2\nline3\n");
  EXPECT_EQ(spec->chat_templates,
            (std::map<std::string, std::string>{{"default", "line1\nline2\nline3\n"}, {"tool_use", "tools: {{ tools }}\n"}}));
}

TEST(ChatTemplates, TemplateFileThatIsNotUtf8IsRejectedNamingTheFile) {
  const std::string dir = CopyZooCheckpoint("llama", "chat-bad-utf8");
  testing::WriteFile(dir + "/chat_template.jinja", std::string("ok\xC3\x28", 4));
  auto spec = LoadModelSpec(dir);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr(dir + "/chat_template.jinja"));
  EXPECT_THAT(spec.status().message(), HasSubstr("byte 2"));
  // Overlong forms and surrogates are invalid too (Python's strict decoder); a BOM and 4-byte
  // characters are valid and kept.
  for (const std::string& bad : {std::string("\xC0\x80"), std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80")}) {
    testing::WriteFile(dir + "/chat_template.jinja", "x" + bad);
    EXPECT_EQ(LoadModelSpec(dir).status().code(), ErrorCode::kInvalidArgument);
  }
  const std::string good = "\xEF\xBB\xBF{{ '\xF0\x9F\x98\x80' }}";
  testing::WriteFile(dir + "/chat_template.jinja", good);
  auto ok = LoadModelSpec(dir);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->chat_template, good);
}

TEST(ChatMetadata, ArtifactStoresTemplatesSpecialIdsAndGenerationDefaultsExactly) {
  const std::string dir = CopyZooCheckpoint("llama", "chat-compile");
  EditJsonFile(dir, "tokenizer_config.json", [](json& c) {
    c["chat_template"] = NamedList();
    c["add_eos_token"] = true;
  });
  const json generation = {{"bos_token_id", 1},       {"eos_token_id", json::array({2, 7})},
                           {"do_sample", true},       {"temperature", 0.6},
                           {"top_k", 20},             {"top_p", 0.95},
                           {"min_p", 0.05},           {"repetition_penalty", 1.1},
                           {"max_new_tokens", 33},    {"max_length", 4096},
                           {"pad_token_id", nullptr}, {"transformers_version", "4.52.0"}};
  testing::WriteFile(dir + "/generation_config.json", generation.dump(2));
  EditJsonFile(dir, "config.json", [](json& c) { c["pad_token_id"] = nullptr; });

  json raw;
  const io::ContractMetadata m = ReadMetadata(Compile(dir), &raw);
  EXPECT_EQ(m.chat_templates, kNamed);
  EXPECT_EQ(m.chat_template, kNamed.at("default"));
  EXPECT_EQ(raw["chat_template"].get<std::string>(), kNamed.at("default"));
  EXPECT_EQ(m.generation_defaults, generation);  // verbatim
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{2, 7}));  // generation_config's list wins
  EXPECT_EQ(m.bos_id, 1);
  // No pad token: null in the metadata, never 0.
  EXPECT_FALSE(m.pad_id.has_value());
  EXPECT_TRUE(raw["pad_id"].is_null());
  EXPECT_TRUE(m.add_bos);
  EXPECT_TRUE(m.add_eos);
  EXPECT_EQ(m.add_eos_ids, (std::vector<int32_t>{2}));  // the SentencePiece model's </s>
}

TEST(ChatMetadata, DeclaredPadTokenIsKept) {
  const std::string dir = CopyZooCheckpoint("llama", "chat-pad");
  EditJsonFile(dir, "config.json", [](json& c) { c["pad_token_id"] = 0; });
  json raw;
  const io::ContractMetadata m = ReadMetadata(Compile(dir), &raw);
  EXPECT_EQ(m.pad_id, 0);
  EXPECT_EQ(raw["pad_id"], 0);
  EXPECT_FALSE(m.add_eos);  // zoo llama: add_eos_token false
  EXPECT_TRUE(m.chat_templates.empty());
}

// `tokenize --add-special` on the artifact adds what it adds on the checkpoint directory:
// BOS per add_bos_token, EOS per add_eos_token.
TEST(ChatMetadata, AddSpecialFromTheArtifactMatchesTheCheckpoint) {
  for (bool add_bos : {true, false}) {
    for (bool add_eos : {true, false}) {
      const std::string dir = CopyZooCheckpoint("llama", "chat-special");
      EditJsonFile(dir, "tokenizer_config.json", [&](json& c) {
        c["add_bos_token"] = add_bos;
        c["add_eos_token"] = add_eos;
      });
      auto from_dir = llm::LoadTokenizerBundle(dir);
      ASSERT_TRUE(from_dir.ok()) << from_dir.status().ToString();
      auto from_artifact = llm::LoadTokenizerBundle(Compile(dir));
      ASSERT_TRUE(from_artifact.ok()) << from_artifact.status().ToString();
      EXPECT_EQ(from_artifact->add_special.prefix, from_dir->add_special.prefix) << add_bos << add_eos;
      EXPECT_EQ(from_artifact->add_special.suffix, from_dir->add_special.suffix) << add_bos << add_eos;
      EXPECT_EQ(from_dir->add_special.prefix.size(), add_bos ? 1u : 0u);
      EXPECT_EQ(from_dir->add_special.suffix.size(), add_eos ? 1u : 0u);
    }
  }
}

// Artifacts written before these fields: pad_id an integer, no add_eos, no chat_templates.
TEST(ChatMetadata, MetadataWithoutTheNewFieldsStillParses) {
  io::ContractMetadata m;
  m.pad_id = 3;
  json j = m.ToJson();
  j.erase("add_eos");
  j.erase("add_eos_ids");
  j.erase("chat_templates");
  auto back = io::ContractMetadata::FromJson(j.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pad_id, 3);
  EXPECT_FALSE(back->add_eos);
  EXPECT_TRUE(back->chat_templates.empty());
  j["chat_templates"] = {{"rag", 5}};
  auto bad = io::ContractMetadata::FromJson(j.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("chat_templates.rag"));
}

}  // namespace
}  // namespace slm::model
