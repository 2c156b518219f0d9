// Strict validation at load: an artifact that breaks one rule of hf_static v1 is refused with an
// error naming the field; the IOManager registry routes by (contract, version).
#include <gtest/gtest.h>

#include "llm/hf_static_v1.h"
#include "llm/io_manager.h"
#include "llm/session_test_util.h"

namespace slm::testing {
namespace {

using nlohmann::json;

// Rewrites the small artifact with `edit` and returns the session creation status.
Status LoadEdited(const std::function<void(json&)>& edit, const std::function<void(std::vector<graph::Graph>&)>& graphs = {}) {
  const std::string out = MakeTempDir("validation") + "/edited.slm";
  Status st = RewriteArtifact(SmallArtifact(), out, edit, graphs);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return OpenSession(out).status();
}

void ExpectError(const Status& st, ErrorCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(st.code(), code) << st.ToString();
  for (const std::string& p : parts) EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' not in: " << st.message();
}

TEST(SessionValidation, UnalteredRewriteLoads) {
  EXPECT_TRUE(LoadEdited([](json&) {}).ok());
}

TEST(SessionValidation, UnknownContractNamesContractAndVersion) {
  ExpectError(LoadEdited([](json& m) { m["contract"] = "hf_dynamic"; }), ErrorCode::kUnsupported, {"hf_dynamic", "version 1", "hf_static v1"});
}

TEST(SessionValidation, UnknownVersionNamesContractAndVersion) {
  ExpectError(LoadEdited([](json& m) { m["version"] = 2; }), ErrorCode::kUnsupported, {"'hf_static'", "metadata.version 2"});
}

TEST(SessionValidation, MethodListedButMissing) {
  ExpectError(LoadEdited([](json& m) { m["methods"].push_back({{"name", "prefill_99"}, {"role", "prefill"}, {"step", 32}, {"logits_mode", "selected"}}); }),
              ErrorCode::kNotFound, {"metadata.methods lists 'prefill_99'"});
}

TEST(SessionValidation, StepDisagreeingWithInputIds) {
  ExpectError(LoadEdited([](json& m) {
                for (auto& mi : m["methods"]) if (mi["name"] == "prefill_16") mi["step"] = 12;
              }),
              ErrorCode::kInvalidArgument, {"prefill_16", "step 12 disagrees with input_ids [1, 16]"});
}

TEST(SessionValidation, CacheShapeDisagreeingWithMetadata) {
  ExpectError(LoadEdited([](json& m) { m["cache"]["layers"][2]["head_dim"] = m["cache"]["layers"][2]["head_dim"].get<int>() * 2; }),
              ErrorCode::kInvalidArgument, {"k_cache.2", "metadata requires"});
}

TEST(SessionValidation, VocabDisagreeingWithLogits) {
  ExpectError(LoadEdited([](json& m) { m["vocab_size"] = 600; }), ErrorCode::kInvalidArgument, {"output 'logits'", "600"});
}

TEST(SessionValidation, LayerCountDisagreeingWithModel) {
  ExpectError(LoadEdited([](json& m) { m["cache"]["layers"].erase(m["cache"]["layers"].size() - 1); }), ErrorCode::kInvalidArgument,
              {"metadata.model.num_layers"});
}

TEST(SessionValidation, LayerCountDisagreeingWithProgram) {
  ExpectError(LoadEdited([](json& m) {
                m["cache"]["layers"].erase(m["cache"]["layers"].size() - 1);
                m["model"].erase("num_layers");
              }),
              ErrorCode::kInvalidArgument, {"overflows metadata.cache.layers", "layer counts disagree"});
}

TEST(SessionValidation, GroupCountDisagreeingWithProgram) {
  ExpectError(LoadEdited([](json& m) {
                m["cache"]["groups"].push_back({{"name", "sliding"}, {"cache_len", 16}, {"window", 16}});
                m["cache"]["layers"][0]["group"] = "sliding";
              }),
              ErrorCode::kInvalidArgument, {"missing input 'attn_mask.sliding'"});
}

TEST(SessionValidation, UnusedGroup) {
  ExpectError(LoadEdited([](json& m) { m["cache"]["groups"].push_back({{"name", "sliding"}, {"cache_len", 16}, {"window", 16}}); }),
              ErrorCode::kInvalidArgument, {"group 'sliding' is used by no layer"});
}

TEST(SessionValidation, UnsupportedCacheDtype) {
  ExpectError(LoadEdited([](json& m) { m["cache"]["dtype"] = "int8"; }), ErrorCode::kUnsupported, {"metadata.cache.dtype 'int8'"});
}

TEST(SessionValidation, DuplicateMethodNames) {
  ExpectError(LoadEdited([](json& m) { m["methods"].push_back(m["methods"][0]); }), ErrorCode::kInvalidArgument, {"duplicate method"});
}

TEST(SessionValidation, DuplicateGroupNames) {
  ExpectError(LoadEdited([](json& m) { m["cache"]["groups"].push_back(m["cache"]["groups"][0]); }), ErrorCode::kInvalidArgument,
              {"metadata.cache.groups[1].name: duplicate group 'full'"});
}

TEST(SessionValidation, RingWithoutWindow) {
  ExpectError(LoadEdited([](json& m) { m["cache"]["groups"][0]["cache_len"] = 32; }), ErrorCode::kInvalidArgument,
              {"metadata.cache.groups[0]", "window"});
}

TEST(SessionValidation, LogitsModeDisagreeingWithSignature) {
  ExpectError(LoadEdited([](json& m) {
                for (auto& mi : m["methods"]) if (mi["role"] == "decode") mi["logits_mode"] = "selected";
              }),
              ErrorCode::kInvalidArgument, {"missing input 'logits_row'"});
}

TEST(SessionValidation, PadIdOutsideVocabulary) {
  ExpectError(LoadEdited([](json& m) { m["pad_id"] = 100000; }), ErrorCode::kInvalidArgument, {"metadata.pad_id"});
}

TEST(SessionValidation, StateOutputBindingAnUnknownState) {
  ExpectError(LoadEdited([](json& m) { m["state_outputs"] = json::array({{{"output", "k_cache_out.0"}, {"binds", "k_cache.9"}}}); }),
              ErrorCode::kInvalidArgument, {"metadata.state_outputs[0].binds 'k_cache.9'"});
}

TEST(SessionValidation, StateOutputListedButMissing) {
  ExpectError(LoadEdited([](json& m) { m["state_outputs"] = json::array({{{"output", "k_cache_out.0"}, {"binds", "k_cache.0"}}}); }),
              ErrorCode::kInvalidArgument, {"missing output 'k_cache_out.0'"});
}

TEST(SessionValidation, OverflowingCacheIndexInProgram) {
  ExpectError(LoadEdited([](json&) {},
                         [](std::vector<graph::Graph>& gs) {
                           for (auto& g : gs) g.values[g.FindValue("k_cache.1")].name = "k_cache.99999999999999999999999";
                         }),
              ErrorCode::kInvalidArgument, {"'k_cache.99999999999999999999999' overflows metadata.cache.layers"});
}

TEST(SessionValidation, InputTheContractDoesNotKnow) {
  ExpectError(LoadEdited([](json&) {}, [](std::vector<graph::Graph>& gs) {
                for (auto& g : gs) g.values[g.FindValue("input_pos")].name = "positions";
              }),
              ErrorCode::kInvalidArgument, {"input 'positions' is not part of hf_static v1"});
}

TEST(IoManagerRegistry, ListsHfStaticV1AndRefusesDuplicates) {
  auto all = llm::RegisteredIoManagers();
  EXPECT_NE(std::find(all.begin(), all.end(), std::make_pair(std::string("hf_static"), int64_t{1})), all.end());
  Status st = llm::RegisterIoManager("hf_static", 1, llm::CreateHfStaticV1Session);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
}

TEST(IoManagerRegistry, PicksTheManagerRegisteredForTheArtifactsContract) {
  static int calls = 0;  // the registry outlives the test
  ASSERT_TRUE(llm::RegisterIoManager("toy_contract", 7, [](std::shared_ptr<const runtime::Program>, const llm::SessionOptions&)
                                         -> Result<std::unique_ptr<llm::Session>> {
                ++calls;
                return Unsupported("toy manager reached");
              }).ok());
  Status st = LoadEdited([](json& m) {
    m["contract"] = "toy_contract";
    m["version"] = 7;
  });
  EXPECT_EQ(calls, 1);
  ExpectError(st, ErrorCode::kUnsupported, {"toy manager reached"});
}

}  // namespace
}  // namespace slm::testing
