// Fuzzes the Hugging Face JSON configs: config.json (ParseModelSpec, CheckContextSupported),
// generation_config.json and tokenizer_config.json (applied to the stories260K spec).
// The first input byte picks the file kind; the rest is the file's text.
#include <string>

#include "io/json_util.h"
#include "model/model_spec.h"

namespace {

// A valid spec for the Apply* functions to modify (stories260K's config.json, inlined so the
// target needs no files).
const slm::model::ModelSpec& BaseSpec() {
  static const slm::model::ModelSpec* spec = [] {
    auto config = nlohmann::json::parse(R"({
      "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
      "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,
      "num_key_value_heads": 4, "vocab_size": 512, "max_position_embeddings": 512,
      "rms_norm_eps": 1e-05, "bos_token_id": 1, "eos_token_id": 2})");
    auto s = slm::model::ParseModelSpec(config, "base/config.json");
    if (!s.ok()) abort();
    return new slm::model::ModelSpec(std::move(s).value());
  }();
  return *spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto json = slm::io::ParseJson(text, "fuzz.json");
  if (!json.ok()) return 0;
  switch (data[0] % 3) {
    case 0: {
      auto spec = slm::model::ParseModelSpec(*json, "fuzz/config.json");
      if (spec.ok()) {
        (void)slm::model::CheckContextSupported(*spec, 16);
        (void)slm::model::CheckContextSupported(*spec, spec->max_position_embeddings);
        for (int64_t l = 0; l < spec->num_layers && l < 4; ++l) (void)spec->LayerRope(l);
      }
      break;
    }
    case 1: {
      slm::model::ModelSpec spec = BaseSpec();
      (void)slm::model::ApplyGenerationConfig(*json, "fuzz/generation_config.json", &spec);
      break;
    }
    case 2: {
      slm::model::ModelSpec spec = BaseSpec();
      (void)slm::model::ApplyTokenizerConfig(*json, "fuzz/tokenizer_config.json", &spec);
      break;
    }
  }
  return 0;
}
