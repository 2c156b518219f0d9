// The hf_static contract metadata stored in an artifact (see docs/hf-static-v1.md): a typed
// struct, its JSON form, and a strict parser. Written by the compiler, read by the runner.
#pragma once

#include <cstdint>
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

struct ContractMetadata {
  std::string contract = "hf_static";
  int64_t version = 1;
  int64_t max_context_len = 0;
  int64_t vocab_size = 0;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  int32_t pad_id = 0;
  bool add_bos = true;
  std::vector<MethodInfo> methods;
  std::string logits_output = "logits";
  std::string cache_dtype = "float32";
  std::vector<CacheGroup> groups;
  std::vector<CacheLayer> layers;
  std::vector<StateOutput> state_outputs;  // optional; empty = caches updated in place only
  std::string tokenizer_kind;  // "sentencepiece" | "" (none embedded)
  std::string chat_template;
  nlohmann::json generation_defaults = nlohmann::json::object();
  nlohmann::json model = nlohmann::json::object();  // informational: architecture, sizes

  const CacheGroup* FindGroup(const std::string& name) const;
  const MethodInfo* FindMethod(const std::string& name) const;

  nlohmann::json ToJson() const;
  // Strict: every required field present with the right JSON type; errors name the field
  // ("metadata.cache.layers[3].group: expected a string, found 7"). Semantic rules of the
  // contract (counts, names, geometry vs. the program) are checked by the IOManager.
  static Result<ContractMetadata> FromJson(const std::string& json_text);
};

}  // namespace slm::io
