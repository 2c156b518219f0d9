#include "llm/generation_defaults.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace slm::llm {
namespace {

using nlohmann::json;

Status Bad(const std::string& source, const char* key, const json& v, const char* expected) {
  return InvalidArgument(source + ": field '" + key + "' is " + v.dump().substr(0, 40) + ", expected " + expected);
}

// A present, non-null value of `key`, or nullptr.
const json* Get(const json& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() || it->is_null() ? nullptr : &*it;
}

Result<std::optional<float>> Number(const json& c, const char* key, const std::string& source, float lo) {
  const json* v = Get(c, key);
  if (v == nullptr) return std::optional<float>();
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < lo) {
    return Bad(source, key, *v, lo == 0 ? "a number >= 0" : "a positive number");
  }
  return std::optional<float>(v->get<float>());
}

Result<std::optional<int64_t>> Count(const json& c, const char* key, const std::string& source) {
  const json* v = Get(c, key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer() || v->get<int64_t>() < 0) return Bad(source, key, *v, "an integer >= 0");
  return std::optional<int64_t>(v->get<int64_t>());
}

}  // namespace

Result<GenerationDefaults> ParseGenerationDefaults(const json& c, const std::string& source) {
  GenerationDefaults g;
  if (!c.is_object()) return InvalidArgument(source + ": is " + c.dump().substr(0, 40) + ", expected a JSON object");
  if (const json* v = Get(c, "do_sample")) {
    if (!v->is_boolean()) return Bad(source, "do_sample", *v, "a boolean");
    g.do_sample = v->get<bool>();
  }
  SLM_ASSIGN_OR_RETURN(g.temperature, Number(c, "temperature", source, 0));
  SLM_ASSIGN_OR_RETURN(g.top_p, Number(c, "top_p", source, 0));
  SLM_ASSIGN_OR_RETURN(g.min_p, Number(c, "min_p", source, 0));
  SLM_ASSIGN_OR_RETURN(g.repetition_penalty, Number(c, "repetition_penalty", source, 0));
  if (g.repetition_penalty && !(*g.repetition_penalty > 0)) {
    return Bad(source, "repetition_penalty", c["repetition_penalty"], "a positive number");
  }
  SLM_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, Count(c, "top_k", source));
  if (top_k) {
    if (*top_k > std::numeric_limits<int32_t>::max()) return Bad(source, "top_k", c["top_k"], "an int32");
    g.top_k = static_cast<int32_t>(*top_k);
  }
  SLM_ASSIGN_OR_RETURN(g.max_new_tokens, Count(c, "max_new_tokens", source));
  SLM_ASSIGN_OR_RETURN(g.max_length, Count(c, "max_length", source));
  return g;
}

void ApplyGenerationDefaults(const GenerationDefaults& g, SamplingParams* p) {
  p->repetition_penalty = g.repetition_penalty.value_or(1.0f);
  if (!g.do_sample.value_or(false)) {
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    return;
  }
  p->temperature = g.temperature.value_or(1.0f);
  p->top_k = g.top_k.value_or(50);
  p->top_p = g.top_p.value_or(1.0f);
  p->min_p = g.min_p.value_or(0.0f);
}

int64_t DefaultMaxNewTokens(const GenerationDefaults& g, int64_t prompt_len, int64_t fallback) {
  if (g.max_new_tokens) return *g.max_new_tokens;
  if (g.max_length) return std::max<int64_t>(0, *g.max_length - prompt_len);
  return fallback;
}

}  // namespace slm::llm
