// ModelSpec: the architecture facts of one Hugging Face checkpoint, read from config.json
// (plus generation_config.json and tokenizer_config.json), and the names of its weights, so
// that nothing downstream parses HF files or spells HF tensor names on its own.
//
// Absent keys take the defaults of transformers' config class for the architecture (for
// Llama: LlamaConfig), so a checkpoint means here what it means in transformers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/rope.h"

namespace slm::model {

struct ModelSpec {
  std::string architecture;  // "LlamaForCausalLM" (config.json "architectures"[0])
  std::string model_type;    // "llama"

  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;        // num_hidden_layers
  int64_t num_heads = 0;         // num_attention_heads
  int64_t num_kv_heads = 0;      // num_key_value_heads; divides num_heads
  int64_t head_dim = 0;          // explicit, or hidden_size / num_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;  // lm_head shares the embedding matrix
  bool attention_bias = false;       // config.json attention_bias (see qkv_bias / o_bias)
  bool mlp_bias = false;             // gate/up/down projections have biases
  // MLP activation: "silu" (SwiGLU MLP), or for the Gemma family's GeGLU MLP
  // "gelu_pytorch_tanh" (tanh-approximated GELU) or "gelu" (exact erf GELU).
  std::string hidden_act = "silu";
  RopeSpec rope;  // global layers; validated: ComputeRopeTables(rope) is non-empty

  // ---- Family structure. Set from the family table in model_spec.cc and the config; the
  // graph builder follows these flags and never tests the architecture name. ----
  bool qkv_bias = false;          // q/k/v projections have biases (Qwen2: always)
  bool o_bias = false;            // o_proj has a bias
  bool fused_qkv = false;         // self_attn.qkv_proj holds the rows [q; k; v] (Phi-3)
  bool fused_gate_up = false;     // mlp.gate_up_proj holds the rows [gate; up] (Phi-3)
  bool qk_norm = false;           // self_attn.q_norm / k_norm: RMSNorm over head_dim, per head,
                                  // before rope (Qwen3, Gemma 3)
  bool norm_add_one = false;      // every RMSNorm gain is (1 + w) (Gemma family)
  bool scale_embeddings = false;  // embeddings × float32(√hidden_size) (Gemma family)
  // Gemma 2/3: attention output and MLP output are normalized too (post_attention_layernorm,
  // post_feedforward_layernorm) and the MLP input norm is pre_feedforward_layernorm.
  bool sandwich_norms = false;
  double attn_scale = 0;          // softmax scale: head_dim^-0.5, or query_pre_attn_scalar^-0.5
  double attn_softcap = 0;        // attention logit soft-capping (0 = none; Gemma 2)
  double final_softcap = 0;       // final logit soft-capping (0 = none; Gemma 2)
  // Per layer: the sliding window W (the key at q is visible to the query at p iff
  // p - W < q <= p), or 0 for full attention. Detected from the config alone: Mistral/Phi-3
  // sliding_window (every layer), Qwen2 use_sliding_window + max_window_layers, Gemma 2 even
  // layers, Gemma 3 sliding_window_pattern, or an explicit layer_types list.
  std::vector<int64_t> layer_window;
  // Rope of the sliding layers when it differs from `rope` (Gemma 3: rope_local_base_freq, no
  // scaling). Empty: every layer uses `rope`.
  std::optional<RopeSpec> local_rope;
  const RopeSpec& LayerRope(int64_t layer) const {
    return local_rope && layer_window[layer] > 0 ? *local_rope : rope;
  }

  // Special ids (each in [0, vocab_size)). generation_config.json overrides config.json for
  // every key it sets. eos_ids may be empty (no stop token).
  std::optional<int32_t> bos_id;
  std::optional<int32_t> pad_id;  // nullopt: the model has no pad token (never stored as 0)
  std::vector<int32_t> eos_ids;
  bool add_bos = true;   // tokenizer_config.json "add_bos_token" (LlamaTokenizer default true)
  bool add_eos = false;  // tokenizer_config.json "add_eos_token" (default false)
  // generation_config.json verbatim (sampling defaults etc.), or an empty object.
  nlohmann::json generation_defaults = nlohmann::json::object();
  // The chat template transformers applies when the caller names none, byte for byte: the
  // string form of tokenizer_config.json "chat_template", or the entry named "default" of its
  // list form, or chat_template.jinja. Empty when the checkpoint has none.
  std::string chat_template;
  // Every named template, when the checkpoint has named ones (tokenizer_config.json's list
  // form [{"name", "template"}], or chat_template.jinja + additional_chat_templates/<name>.jinja
  // with at least one non-default name), "default" included; empty otherwise.
  std::map<std::string, std::string> chat_templates;

  // HF tensor names. The graph builder asks for these instead of spelling them.
  std::string EmbedName() const;      // "model.embed_tokens.weight"
  std::string LmHeadName() const;     // "lm_head.weight", or EmbedName() when tied
  std::string FinalNormName() const;  // "model.norm.weight"
  // Per-layer norm suffixes (for LayerWeight): the attention input norm, the MLP input norm,
  // and with sandwich_norms the attention-output and MLP-output norms ("" when absent).
  std::string AttnNormSuffix() const { return "input_layernorm.weight"; }
  std::string MlpNormSuffix() const {
    return sandwich_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
  }
  std::string AttnOutNormSuffix() const {
    return sandwich_norms ? "post_attention_layernorm.weight" : "";
  }
  std::string MlpOutNormSuffix() const {
    return sandwich_norms ? "post_feedforward_layernorm.weight" : "";
  }
  std::string LayerPrefix(int64_t layer) const;  // "model.layers.<layer>"
  // LayerWeight(3, "self_attn.q_proj.weight") == "model.layers.3.self_attn.q_proj.weight".
  std::string LayerWeight(int64_t layer, std::string_view suffix) const;
};

// Architectures ParseModelSpec accepts ("LlamaForCausalLM", "MistralForCausalLM", ...).
std::vector<std::string> SupportedArchitectures();

// Reads the architecture facts from a parsed config.json; `source_name` (the file's path)
// starts every error message. Errors: Unsupported for an architecture, hidden_act or
// rope_scaling type not implemented here (naming it and listing the supported ones);
// InvalidArgument for an ill-typed or out-of-range field (naming field and value; also
// num_attention_heads not a multiple of num_key_value_heads); NotFound for a missing required
// field (the sizes, which transformers would silently default to Llama-7B's).
// Special ids take LlamaConfig's defaults (bos 1, eos 2, no pad) when the keys are absent.
Result<ModelSpec> ParseModelSpec(const nlohmann::json& config, const std::string& source_name);

// Overrides bos/eos/pad with those set in a parsed generation_config.json and keeps the object
// as generation_defaults.
Status ApplyGenerationConfig(const nlohmann::json& generation_config,
                             const std::string& source_name, ModelSpec* spec);
// Reads add_bos_token, add_eos_token and chat_template (a string, or a list of named templates)
// from a parsed tokenizer_config.json.
Status ApplyTokenizerConfig(const nlohmann::json& tokenizer_config,
                            const std::string& source_name, ModelSpec* spec);

// Checks that the spec can be compiled for a context of `max_context_len` tokens. Every rope
// type is exact at any length now (longrope carries both tables and picks one per call, see
// docs/hf-static-v1.md), so only a non-positive length is refused.
Status CheckContextSupported(const ModelSpec& spec, int64_t max_context_len);
// The model's own context: max_position_embeddings.
int64_t LongestStaticContext(const ModelSpec& spec);

// Reads <dir>/config.json, then generation_config.json, tokenizer_config.json, and the chat
// template files when present. As transformers does, template files take priority over
// tokenizer_config.json's chat_template: chat_template.jinja is "default",
// additional_chat_templates/<name>.jinja is <name>; they are read as Python's text mode reads
// them (UTF-8, "\r\n" and "\r" become "\n"). NotFound naming the path when the directory or
// config.json is missing; InvalidArgument naming a template file that is not UTF-8.
Result<ModelSpec> LoadModelSpec(const std::string& checkpoint_dir);

}  // namespace slm::model
