// Generation defaults of an artifact: the generation_config.json the compiler stored verbatim
// (metadata "generation_defaults"), read with transformers' GenerationConfig semantics so that
// `staticlm run` without sampling flags generates as model.generate() would by default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "llm/sampler.h"

namespace slm::llm {

// The keys of generation_config.json that `run` uses; each nullopt when absent or null.
struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<int64_t> max_new_tokens, max_length;
};

// Typed view of a generation_config object. InvalidArgument naming `source` and the key when a
// value has the wrong type or range (a temperature that is not a number, top_k < 0, ...).
Result<GenerationDefaults> ParseGenerationDefaults(const nlohmann::json& config, const std::string& source);

// transformers' defaults applied to `p` (seed untouched):
//   repetition_penalty applies with or without sampling (it is a logits processor);
//   do_sample false or absent: greedy (temperature 0), top-k/top-p/min-p off, as generate()
//   ignores the warpers then;
//   do_sample true: temperature (default 1.0), top_k (default 50), top_p (default 1.0), min_p.
void ApplyGenerationDefaults(const GenerationDefaults& g, SamplingParams* p);

// Tokens to generate when the command line does not say: max_new_tokens; else max_length minus
// the prompt (max_length counts the prompt in transformers), at least 0; else `fallback`.
int64_t DefaultMaxNewTokens(const GenerationDefaults& g, int64_t prompt_len, int64_t fallback);

}  // namespace slm::llm
