// The hf_static contract metadata stored in an artifact (see docs/hf-static-v1.md): a typed
// struct, its JSON form, and a strict parser. Written by the compiler, read by the runner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace slm::io {

struct MethodInfo {
  std::string name;
  std::string role;         // "prefill" | "decode"
  int64_t step = 1;         // tokens per call
  std::string logits_mode;  // "selected" ([1,1,V], needs `logits_row`) | "all" ([1,T,V])
};

struct CacheGroup {
  std::string name;       // "full" | "sliding"
  int64_t cache_len = 0;  // slots of the ring
  int64_t window = 0;     // 0 = unlimited
};

struct CacheLayer {
  std::string group;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
};

// A method output that returns an updated state (as HF exports return caches): the runner binds
// it to the buffer of the input it `binds` (an alias, no copy) after an exact geometry check.
struct StateOutput {
  std::string output;  // e.g. "k_cache_out.3"
  std::string binds;   // e.g. "k_cache.3"
};

// Cache formats (metadata.cache.format, docs/hf-static-v1.md "Cache formats"). An artifact
// without the field has kv_f32_v1 (float32 caches, no extra states).
inline constexpr char kCacheFormatF32[] = "kv_f32_v1";
// int8 caches [1, Hkv, L, hd] plus f32 row scales [1, Hkv, L] per cache (per token, per head;
// symmetric absmax / 127; kernels/attention_q8.h), the scales declared in cache.extra_states.
inline constexpr char kCacheFormatInt8[] = "kv_int8_tokenhead_v1";

// A state tensor a cache format adds beside the caches (int8: the row scales), with its exact
// geometry so a runner allocates it without knowing the format's internals.
struct CacheExtraState {
  std::string name;    // "k_scale.3"
  std::string scales;  // the cache it belongs to: "k_cache.3"
  std::string dtype;   // "float32"
  std::vector<int64_t> shape;  // [1, n_kv_heads, cache_len]
};
// "k_scale.<layer>" / "v_scale.<layer>" (kv = 'k' | 'v').
std::string KvScaleStateName(char kv, int64_t layer);

struct ContractMetadata {
  std::string contract = "hf_static";
  int64_t version = 1;
  int64_t max_context_len = 0;
  int64_t vocab_size = 0;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  // The model's pad token; nullopt (JSON null) when it has none. Padding rows of a call are
  // filled with PaddingId(), which any in-vocabulary id would serve (their pos is -1).
  std::optional<int32_t> pad_id;
  bool add_bos = true;
  // tokenizer_config.json add_eos_token (or the tokenizer's post-processor): encode with
  // special tokens appends add_eos_ids. Absent in older artifacts: false.
  bool add_eos = false;
  std::vector<int32_t> add_eos_ids;
  std::vector<MethodInfo> methods;
  std::string logits_output = "logits";
  std::string cache_dtype = "float32";
  std::string cache_format;  // "" = absent (kv_f32_v1); else one of the kCacheFormat* names
  std::vector<CacheExtraState> cache_extra_states;  // optional: cache.extra_states
  std::vector<CacheGroup> groups;
  std::vector<CacheLayer> layers;
  std::vector<StateOutput> state_outputs;  // optional; empty = caches updated in place only
  std::string tokenizer_kind;  // "sentencepiece" | "" (none embedded)
  std::string chat_template;  // the default template, byte for byte ("" = none)
  // Named templates (name → template, "default" included) when the checkpoint has named ones.
  std::map<std::string, std::string> chat_templates;
  nlohmann::json generation_defaults = nlohmann::json::object();
  nlohmann::json model = nlohmann::json::object();  // informational: architecture, sizes

  int32_t PaddingId() const { return pad_id.value_or(0); }
  const CacheGroup* FindGroup(const std::string& name) const;
  const MethodInfo* FindMethod(const std::string& name) const;

  nlohmann::json ToJson() const;
  // Strict: every required field present with the right JSON type; errors name the field
  // ("metadata.cache.layers[3].group: expected a string, found 7"). Semantic rules of the
  // contract (counts, names, geometry vs. the program) are checked by the IOManager.
  static Result<ContractMetadata> FromJson(const std::string& json_text);
};

}  // namespace slm::io
