#include "model/model_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/mapped_file.h"
#include "io/json_util.h"

namespace slm::model {

using io::JsonObject;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// How a family's config declares its sliding-window layers (see ModelSpec::layer_window).
enum class SlidingRule {
  kNone,        // never (Llama, Gemma)
  kAllLayers,   // sliding_window, when set, applies to every layer (Mistral, Phi-3)
  kQwen,        // use_sliding_window && sliding_window: layers >= max_window_layers (Qwen2/3)
  kEvenLayers,  // layers 0, 2, 4, ... (Gemma 2)
  kPattern,     // layer i iff (i + 1) % sliding_window_pattern != 0 (Gemma 3)
};
// Which projections have biases.
enum class BiasRule {
  kConfig,   // config.json attention_bias, all four projections (Llama, Qwen3, Gemma)
  kQkvOnly,  // q/k/v always, o never (Qwen2)
  kNone,     // never (Mistral, Phi-3)
};

// Every per-family fact lives in this table (and the defaults of transformers' config class
// for that family); the graph builder only follows the flags it puts into ModelSpec.
struct ArchitectureEntry {
  const char* architecture;
  const char* model_type;
  const char* alt_model_type;   // another model_type of the same class, or ""
  const char* act_key;          // "hidden_act" or "hidden_activation" (Gemma 2/3)
  const char* act_default;
  double eps_default;
  double theta_default;
  int64_t head_dim_default;     // 0 = hidden_size / num_attention_heads
  bool tie_default;
  BiasRule bias;
  bool mlp_bias_key;            // reads mlp_bias (Llama)
  bool fused;                   // qkv_proj and gate_up_proj (Phi-3)
  bool qk_norm;                 // q_norm / k_norm (Qwen3, Gemma 3)
  bool gemma_norms;             // (1 + w) norms and √hidden embedding scale
  bool sandwich_norms;          // four norms per layer (Gemma 2/3)
  bool query_pre_attn_scalar;   // softmax scale from query_pre_attn_scalar (Gemma 2/3)
  double attn_softcap_default;  // attn_logit_softcapping (0 = key not read)
  double final_softcap_default; // final_logit_softcapping (0 = key not read)
  bool reads_softcaps;          // reads the two soft-capping keys (Gemma 2/3)
  SlidingRule sliding;
  int64_t sliding_window_default;  // when the key is absent (0 = none)
  bool local_rope;              // rope_local_base_freq for sliding layers (Gemma 3)
};
constexpr ArchitectureEntry kArchitectures[] = {
    // arch, type, alt, act key, act, eps, theta, head_dim, tie, bias, mlp_bias, fused, qk_norm,
    // gemma, sandwich, qpas, attn cap, final cap, reads caps, sliding, window, local rope
    {"LlamaForCausalLM", "llama", "", "hidden_act", "silu", 1e-6, 10000.0, 0, false,
     BiasRule::kConfig, true, false, false, false, false, false, 0, 0, false, SlidingRule::kNone,
     0, false},
    {"MistralForCausalLM", "mistral", "", "hidden_act", "silu", 1e-6, 10000.0, 0, false,
     BiasRule::kNone, false, false, false, false, false, false, 0, 0, false,
     SlidingRule::kAllLayers, 4096, false},
    {"Qwen2ForCausalLM", "qwen2", "", "hidden_act", "silu", 1e-6, 10000.0, 0, false,
     BiasRule::kQkvOnly, false, false, false, false, false, false, 0, 0, false, SlidingRule::kQwen,
     4096, false},
    {"Qwen3ForCausalLM", "qwen3", "", "hidden_act", "silu", 1e-6, 10000.0, 128, false,
     BiasRule::kConfig, false, false, true, false, false, false, 0, 0, false, SlidingRule::kQwen,
     4096, false},
    {"GemmaForCausalLM", "gemma", "", "hidden_act", "gelu_pytorch_tanh", 1e-6, 10000.0, 256, true,
     BiasRule::kConfig, false, false, false, true, false, false, 0, 0, false, SlidingRule::kNone,
     0, false},
    {"Gemma2ForCausalLM", "gemma2", "", "hidden_activation", "gelu_pytorch_tanh", 1e-6, 10000.0,
     256, true, BiasRule::kConfig, false, false, false, true, true, true, 50.0, 30.0, true,
     SlidingRule::kEvenLayers, 4096, false},
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3", "hidden_activation", "gelu_pytorch_tanh", 1e-6,
     1000000.0, 256, true, BiasRule::kConfig, false, false, true, true, true, true, 0, 0, true,
     SlidingRule::kPattern, 4096, true},
    {"Phi3ForCausalLM", "phi3", "", "hidden_act", "silu", 1e-5, 10000.0, 0, false,
     BiasRule::kNone, false, true, false, false, false, false, 0, 0, false,
     SlidingRule::kAllLayers, 0, false},
};

std::string JoinSupported() {
  std::string s;
  for (const ArchitectureEntry& e : kArchitectures) {
    s += std::string(s.empty() ? "" : ", ") + e.architecture;
  }
  return s;
}

// Sizes are bounded by int32 so that products of two of them (weight shapes) cannot overflow
// and kernels may index with 32-bit ints.
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

Result<int64_t> CheckDim(const JsonObject& c, std::string_view key, int64_t v) {
  if (v < 1 || v > kMaxDim) {
    return InvalidArgument(c.Where(key) + " is " + std::to_string(v) +
                           ", expected an integer in [1, " + std::to_string(kMaxDim) + "]");
  }
  return v;
}
Result<int64_t> Dim(const JsonObject& c, std::string_view key) {
  SLM_ASSIGN_OR_RETURN(int64_t v, c.Int(key));
  return CheckDim(c, key, v);
}
Result<int64_t> DimOr(const JsonObject& c, std::string_view key, int64_t fallback) {
  SLM_ASSIGN_OR_RETURN(int64_t v, c.IntOr(key, fallback));
  return CheckDim(c, key, v);
}

Result<double> PositiveNumberOr(const JsonObject& c, std::string_view key, double fallback) {
  SLM_ASSIGN_OR_RETURN(double v, c.NumberOr(key, fallback));
  if (!(v > 0) || !std::isfinite(v)) {  // only a value read from the file can fail here
    return InvalidArgument(c.Where(key) + " is " + io::DescribeJson(*c.Get(key)) +
                           ", expected a positive number");
  }
  return v;
}

// "architectures"[0]; transformers' Auto classes go by model_type when the list is absent.
Result<ArchitectureEntry> ParseArchitecture(const JsonObject& c) {
  std::string name;
  if (const json* list = c.Get("architectures")) {
    if (!list->is_array() || list->empty()) {
      return InvalidArgument(c.Where("architectures") + " is " + io::DescribeJson(*list) +
                             ", expected a non-empty list of class names");
    }
    SLM_ASSIGN_OR_RETURN(name, io::JsonToString((*list)[0], c.Where("architectures") + " element 0",
                                                ErrorCode::kInvalidArgument));
    for (const ArchitectureEntry& e : kArchitectures) {
      if (name == e.architecture) return e;
    }
  } else {
    if (!c.Has("model_type")) {
      return InvalidArgument(c.source() + ": has neither 'architectures' nor 'model_type', "
                             "expected one of them to name the architecture");
    }
    SLM_ASSIGN_OR_RETURN(std::string model_type, c.String("model_type"));
    for (const ArchitectureEntry& e : kArchitectures) {
      if (model_type == e.model_type || (*e.alt_model_type && model_type == e.alt_model_type)) {
        return e;
      }
    }
    name = "model_type " + model_type;
  }
  return Unsupported(c.source() + ": architecture '" + name +
                     "' is not supported; supported: " + JoinSupported());
}

Status ParseDims(const JsonObject& c, const ArchitectureEntry& arch, ModelSpec* s) {
  SLM_ASSIGN_OR_RETURN(s->hidden_size, Dim(c, "hidden_size"));
  SLM_ASSIGN_OR_RETURN(s->intermediate_size, Dim(c, "intermediate_size"));
  SLM_ASSIGN_OR_RETURN(s->num_layers, Dim(c, "num_hidden_layers"));
  SLM_ASSIGN_OR_RETURN(s->num_heads, Dim(c, "num_attention_heads"));
  SLM_ASSIGN_OR_RETURN(s->num_kv_heads, DimOr(c, "num_key_value_heads", s->num_heads));
  SLM_ASSIGN_OR_RETURN(s->vocab_size, Dim(c, "vocab_size"));
  SLM_ASSIGN_OR_RETURN(s->max_position_embeddings, DimOr(c, "max_position_embeddings", 2048));
  if (s->num_heads % s->num_kv_heads != 0) {
    return InvalidArgument(c.source() + ": num_attention_heads " + std::to_string(s->num_heads) +
                           " is not a multiple of num_key_value_heads " +
                           std::to_string(s->num_kv_heads));
  }
  if (c.Has("head_dim")) {
    SLM_ASSIGN_OR_RETURN(s->head_dim, Dim(c, "head_dim"));
  } else if (arch.head_dim_default > 0) {
    s->head_dim = arch.head_dim_default;
  } else if (s->hidden_size % s->num_heads != 0) {
    return InvalidArgument(c.source() + ": hidden_size " + std::to_string(s->hidden_size) +
                           " is not a multiple of num_attention_heads " +
                           std::to_string(s->num_heads) + " and head_dim is not set");
  } else {
    s->head_dim = s->hidden_size / s->num_heads;
  }
  return Status::Ok();
}

Result<double> NonNegativeNumberOr(const JsonObject& c, std::string_view key, double fallback) {
  SLM_ASSIGN_OR_RETURN(double v, c.NumberOr(key, fallback));
  if (!(v >= 0) || !std::isfinite(v)) {
    return InvalidArgument(c.Where(key) + " is " + io::DescribeJson(*c.Get(key)) +
                           ", expected a non-negative number");
  }
  return v;
}

Status ParseLayerOptions(const JsonObject& c, const ArchitectureEntry& arch, ModelSpec* s) {
  SLM_ASSIGN_OR_RETURN(s->rms_norm_eps, PositiveNumberOr(c, "rms_norm_eps", arch.eps_default));
  SLM_ASSIGN_OR_RETURN(s->tie_word_embeddings, c.BoolOr("tie_word_embeddings", arch.tie_default));
  SLM_ASSIGN_OR_RETURN(s->attention_bias, c.BoolOr("attention_bias", false));
  if (arch.mlp_bias_key) {
    SLM_ASSIGN_OR_RETURN(s->mlp_bias, c.BoolOr("mlp_bias", false));
  }
  switch (arch.bias) {
    case BiasRule::kConfig: s->qkv_bias = s->o_bias = s->attention_bias; break;
    case BiasRule::kQkvOnly: s->qkv_bias = true; s->o_bias = false; break;
    case BiasRule::kNone: s->qkv_bias = s->o_bias = false; break;
  }
  // Phi-4-mini's lm_head_bias, when true, would add a bias the graph does not have.
  SLM_ASSIGN_OR_RETURN(bool lm_head_bias, c.BoolOr("lm_head_bias", false));
  if (lm_head_bias) {
    return Unsupported(c.Where("lm_head_bias") + " is true, not supported (no lm_head bias)");
  }
  // The key each family's MLP reads (transformers today: GemmaMLP ACT2FN[hidden_act], Gemma 2/3
  // ACT2FN[hidden_activation]). A GeGLU family takes either GELU ACT2FN knows as torch's own:
  // "gelu_pytorch_tanh" (approximate='tanh') or "gelu" (GELUActivation: exact erf).
  SLM_ASSIGN_OR_RETURN(s->hidden_act, c.StringOr(arch.act_key, arch.act_default));
  const std::string family_act = arch.act_default;
  const bool geglu_family = family_act == "gelu_pytorch_tanh";
  if (s->hidden_act != family_act && !(geglu_family && s->hidden_act == "gelu")) {
    return Unsupported(c.Where(arch.act_key) + " is '" + s->hidden_act + "', not supported for " +
                       s->architecture + "; supported: " +
                       (geglu_family ? family_act + ", gelu" : family_act));
  }
  s->fused_qkv = s->fused_gate_up = arch.fused;
  s->qk_norm = arch.qk_norm;
  s->norm_add_one = s->scale_embeddings = arch.gemma_norms;
  s->sandwich_norms = arch.sandwich_norms;
  double scalar = static_cast<double>(s->head_dim);
  if (arch.query_pre_attn_scalar) {
    SLM_ASSIGN_OR_RETURN(scalar, PositiveNumberOr(c, "query_pre_attn_scalar", 256.0));
  }
  s->attn_scale = std::pow(scalar, -0.5);  // Python's `x ** -0.5`
  if (arch.reads_softcaps) {
    SLM_ASSIGN_OR_RETURN(s->attn_softcap,
                         NonNegativeNumberOr(c, "attn_logit_softcapping", arch.attn_softcap_default));
    SLM_ASSIGN_OR_RETURN(s->final_softcap, NonNegativeNumberOr(c, "final_logit_softcapping",
                                                               arch.final_softcap_default));
  }
  return Status::Ok();
}

// An explicit "layer_types": ["sliding_attention" | "full_attention", ...] (newer
// transformers write it for every family with sliding layers).
Status ParseLayerTypes(const JsonObject& c, int64_t window, ModelSpec* s) {
  const json& list = *c.Get("layer_types");
  if (!list.is_array() || static_cast<int64_t>(list.size()) != s->num_layers) {
    return InvalidArgument(c.Where("layer_types") + " is " + io::DescribeJson(list) +
                           ", expected a list of " + std::to_string(s->num_layers) +
                           " layer types (num_hidden_layers)");
  }
  for (int64_t i = 0; i < s->num_layers; ++i) {
    const std::string where = c.Where("layer_types") + " element " + std::to_string(i);
    SLM_ASSIGN_OR_RETURN(std::string type,
                         io::JsonToString(list[i], where, ErrorCode::kInvalidArgument));
    if (type == "sliding_attention") {
      if (window == 0) {
        return InvalidArgument(where + " is 'sliding_attention' but sliding_window is not set");
      }
      s->layer_window[i] = window;
    } else if (type != "full_attention") {
      return Unsupported(where + " is '" + type +
                         "', not supported; supported: sliding_attention, full_attention");
    }
  }
  return Status::Ok();
}

// ModelSpec::layer_window from the family's rule (see SlidingRule).
Status ParseSliding(const JsonObject& c, const ArchitectureEntry& arch, ModelSpec* s) {
  s->layer_window.assign(static_cast<size_t>(s->num_layers), 0);
  if (arch.sliding == SlidingRule::kNone) return Status::Ok();
  int64_t window = arch.sliding_window_default;
  if (c.value().contains("sliding_window")) {
    window = 0;  // explicit null: no window
    if (c.Has("sliding_window")) {
      SLM_ASSIGN_OR_RETURN(window, Dim(c, "sliding_window"));
    }
  }
  if (arch.sliding == SlidingRule::kQwen) {
    // Qwen2Config: sliding_window is ignored unless use_sliding_window.
    SLM_ASSIGN_OR_RETURN(bool use, c.BoolOr("use_sliding_window", false));
    if (!use) window = 0;
  }
  if (c.Has("layer_types")) return ParseLayerTypes(c, window, s);
  if (window == 0) return Status::Ok();
  int64_t first = 0, pattern = 0;
  if (arch.sliding == SlidingRule::kQwen) {
    SLM_ASSIGN_OR_RETURN(first, c.IntOr("max_window_layers", 28));
  } else if (arch.sliding == SlidingRule::kPattern) {
    SLM_ASSIGN_OR_RETURN(pattern, DimOr(c, "sliding_window_pattern", 6));
  }
  for (int64_t i = 0; i < s->num_layers; ++i) {
    bool sliding = true;
    switch (arch.sliding) {
      case SlidingRule::kNone: sliding = false; break;
      case SlidingRule::kAllLayers: break;
      case SlidingRule::kQwen: sliding = i >= first; break;
      case SlidingRule::kEvenLayers: sliding = i % 2 == 0; break;
      case SlidingRule::kPattern: sliding = (i + 1) % pattern != 0; break;
    }
    if (sliding) s->layer_window[i] = window;
  }
  return Status::Ok();
}

// The scaling-specific fields of a rope_scaling object (transformers v5 spells the same
// object rope_parameters and moves rope_theta into it).
Status ParseRopeScaling(const JsonObject& r, RopeSpec* rope) {
  std::string type = "default";
  if (r.Has("rope_type")) {
    SLM_ASSIGN_OR_RETURN(type, r.String("rope_type"));
  } else if (r.Has("type")) {  // the key's name before transformers 4.43
    SLM_ASSIGN_OR_RETURN(type, r.String("type"));
  } else {
    return InvalidArgument(r.Where("rope_type") + " is missing (nor is there a legacy 'type')");
  }
  if (type == "default") {
    rope->scaling = RopeScalingType::kNone;
  } else if (type == "linear") {
    rope->scaling = RopeScalingType::kLinear;
    SLM_ASSIGN_OR_RETURN(rope->factor, r.Number("factor"));
  } else if (type == "llama3") {
    rope->scaling = RopeScalingType::kLlama3;
    SLM_ASSIGN_OR_RETURN(rope->factor, r.Number("factor"));
    SLM_ASSIGN_OR_RETURN(rope->low_freq_factor, r.Number("low_freq_factor"));
    SLM_ASSIGN_OR_RETURN(rope->high_freq_factor, r.Number("high_freq_factor"));
    SLM_ASSIGN_OR_RETURN(rope->original_max_position_embeddings,
                         r.Int("original_max_position_embeddings"));
  } else if (type == "longrope") {
    rope->scaling = RopeScalingType::kLongRope;
    for (const char* key : {"short_factor", "long_factor"}) {
      const json* list = r.Get(key);
      if (list == nullptr || !list->is_array()) {
        return InvalidArgument(r.Where(key) + (list ? " is " + io::DescribeJson(*list) : " is missing") +
                               ", expected a list of numbers");
      }
      std::vector<double>& dst = std::string(key) == "short_factor" ? rope->short_factor : rope->long_factor;
      for (size_t i = 0; i < list->size(); ++i) {
        SLM_ASSIGN_OR_RETURN(double v, io::JsonToDouble((*list)[i], r.Where(key) + " element " + std::to_string(i),
                                                        ErrorCode::kInvalidArgument));
        dst.push_back(v);
      }
    }
    // attention_factor: from rope_scaling, else derived in ParseRope (needs the context sizes).
    rope->attention_factor = 0;
    if (r.Has("attention_factor")) {
      SLM_ASSIGN_OR_RETURN(rope->attention_factor, r.Number("attention_factor"));
    }
    if (r.Has("factor")) {
      SLM_ASSIGN_OR_RETURN(rope->factor, r.Number("factor"));
    }
  } else {
    return Unsupported(r.Where("rope_type") + " is '" + type +
                       "', not supported; supported: default, linear, llama3, longrope");
  }
  if (r.Has("rope_theta")) {
    SLM_ASSIGN_OR_RETURN(rope->theta, r.Number("rope_theta"));
  }
  return Status::Ok();
}

// _compute_longrope_parameters: with original_max_position_embeddings at the top level
// (Phi-3), the factor is max_position_embeddings / original; the attention factor, unless
// given, is sqrt(1 + ln(factor) / ln(original)) (1 when factor <= 1).
Status FinishLongRope(const JsonObject& c, int64_t max_position_embeddings, RopeSpec* rope) {
  int64_t original = max_position_embeddings;
  double factor = rope->factor;
  if (c.Has("original_max_position_embeddings")) {
    SLM_ASSIGN_OR_RETURN(original, Dim(c, "original_max_position_embeddings"));
    factor = static_cast<double>(max_position_embeddings) / static_cast<double>(original);
  }
  rope->original_max_position_embeddings = original;
  if (rope->attention_factor == 0) {
    rope->attention_factor =
        factor <= 1.0 ? 1.0
                      : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(original)));
  }
  return Status::Ok();
}

// _compute_*_rope_parameters read rope_theta, partial_rotary_factor and rope_scaling.
Result<RopeSpec> ParseRope(const JsonObject& c, int64_t head_dim, double theta_default,
                           int64_t max_position_embeddings) {
  RopeSpec rope;
  SLM_ASSIGN_OR_RETURN(rope.theta, c.NumberOr("rope_theta", theta_default));
  SLM_ASSIGN_OR_RETURN(double partial, c.NumberOr("partial_rotary_factor", 1.0));
  if (!(partial > 0 && partial <= 1)) {
    return InvalidArgument(c.Where("partial_rotary_factor") + " is " +
                           io::DescribeJson(*c.Get("partial_rotary_factor")) +
                           ", expected a number in (0, 1]");
  }
  rope.rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * partial);  // Python int()
  const char* scaling_key = c.Has("rope_scaling")      ? "rope_scaling"
                            : c.Has("rope_parameters") ? "rope_parameters"
                                                       : nullptr;
  if (scaling_key != nullptr) {
    SLM_ASSIGN_OR_RETURN(JsonObject scaling, c.Object(scaling_key));
    SLM_RETURN_IF_ERROR(ParseRopeScaling(scaling, &rope));
    if (rope.scaling == RopeScalingType::kLongRope) {
      SLM_RETURN_IF_ERROR(FinishLongRope(c, max_position_embeddings, &rope));
    }
  }
  Status valid = ValidateRopeSpec(rope);
  if (!valid.ok()) return WithContext(c.source(), valid);
  return rope;
}

// A special token id: an integer in [0, vocab_size).
Result<int32_t> TokenId(const json& v, const std::string& where, int64_t vocab_size) {
  SLM_ASSIGN_OR_RETURN(int64_t id, io::JsonToInt64(v, where, ErrorCode::kInvalidArgument));
  if (id < 0 || id >= vocab_size) {
    return InvalidArgument(where + " is " + std::to_string(id) + ", expected a token id in [0, " +
                           std::to_string(vocab_size) + ")");
  }
  return static_cast<int32_t>(id);
}

// eos_token_id: one id or a list of them.
Result<std::vector<int32_t>> EosIds(const json& v, const std::string& where, int64_t vocab_size) {
  std::vector<int32_t> ids;
  if (!v.is_array()) {
    SLM_ASSIGN_OR_RETURN(int32_t id, TokenId(v, where, vocab_size));
    ids.push_back(id);
    return ids;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    SLM_ASSIGN_OR_RETURN(int32_t id, TokenId(v[i], where + " element " + std::to_string(i), vocab_size));
    ids.push_back(id);
  }
  return ids;
}

// Sets each of bos/eos/pad that `c` sets (present and not null).
Status OverrideSpecialIds(const JsonObject& c, ModelSpec* s) {
  if (const json* v = c.Get("bos_token_id")) {
    SLM_ASSIGN_OR_RETURN(s->bos_id, TokenId(*v, c.Where("bos_token_id"), s->vocab_size));
  }
  if (const json* v = c.Get("eos_token_id")) {
    SLM_ASSIGN_OR_RETURN(s->eos_ids, EosIds(*v, c.Where("eos_token_id"), s->vocab_size));
  }
  if (const json* v = c.Get("pad_token_id")) {
    // Early Llama conversions wrote -1 for "no pad token".
    if (v->is_number_integer() && v->get<int64_t>() < 0) {
      s->pad_id.reset();
    } else {
      SLM_ASSIGN_OR_RETURN(s->pad_id, TokenId(*v, c.Where("pad_token_id"), s->vocab_size));
    }
  }
  return Status::Ok();
}

// config.json: LlamaConfig's defaults (bos 1, eos 2, no pad) apply only when a key is absent;
// an explicit null means "none".
Status ParseSpecialIds(const JsonObject& c, ModelSpec* s) {
  json ids = {{"bos_token_id", 1}, {"eos_token_id", 2}};
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (c.value().contains(key)) ids[key] = c.value()[key];
  }
  return OverrideSpecialIds(JsonObject(ids, c.source()), s);
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and values past
// U+10FFFF included, as Python's strict decoder), or npos.
size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (b < 0x80) { ++i; continue; }
    if (b >= 0xC2 && b <= 0xDF) { n = 1; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 2; cp = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 3; cp = b & 0x07; }
    else return i;
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return i;
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += n + 1;
  }
  return std::string::npos;
}

// A .jinja template as transformers holds it: open(path, encoding="utf-8").read(), i.e.
// strict UTF-8 and universal newlines ("\r\n" and lone "\r" read as "\n").
Result<std::string> ReadTemplateFile(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  if (size_t bad = FirstInvalidUtf8(bytes); bad != std::string::npos) {
    return InvalidArgument(path + ": byte " + std::to_string(bad) +
                           " is not valid UTF-8, expected a UTF-8 text file (a Jinja chat template)");
  }
  std::string text;
  text.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '\r') {
      text += '\n';
      if (i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
    } else {
      text += bytes[i];
    }
  }
  return text;
}

}  // namespace

std::string ModelSpec::EmbedName() const { return "model.embed_tokens.weight"; }
std::string ModelSpec::LmHeadName() const {
  return tie_word_embeddings ? EmbedName() : "lm_head.weight";
}
std::string ModelSpec::FinalNormName() const { return "model.norm.weight"; }
std::string ModelSpec::LayerPrefix(int64_t layer) const {
  return "model.layers." + std::to_string(layer);
}
std::string ModelSpec::LayerWeight(int64_t layer, std::string_view suffix) const {
  return LayerPrefix(layer) + "." + std::string(suffix);
}

std::vector<std::string> SupportedArchitectures() {
  std::vector<std::string> names;
  for (const ArchitectureEntry& e : kArchitectures) names.emplace_back(e.architecture);
  return names;
}

Result<ModelSpec> ParseModelSpec(const json& config, const std::string& source_name) {
  if (!config.is_object()) {
    return InvalidArgument(source_name + ": is " + io::DescribeJson(config) +
                           ", expected a JSON object");
  }
  JsonObject c(config, source_name);
  ModelSpec s;
  SLM_ASSIGN_OR_RETURN(ArchitectureEntry arch, ParseArchitecture(c));
  s.architecture = arch.architecture;
  SLM_ASSIGN_OR_RETURN(s.model_type, c.StringOr("model_type", arch.model_type));
  SLM_RETURN_IF_ERROR(ParseDims(c, arch, &s));
  SLM_RETURN_IF_ERROR(ParseLayerOptions(c, arch, &s));
  SLM_ASSIGN_OR_RETURN(s.rope, ParseRope(c, s.head_dim, arch.theta_default, s.max_position_embeddings));
  SLM_RETURN_IF_ERROR(ParseSliding(c, arch, &s));
  if (arch.local_rope) {
    // Gemma 3's local layers: default rope (no scaling) at rope_local_base_freq.
    RopeSpec local = s.rope;
    local.scaling = RopeScalingType::kNone;
    SLM_ASSIGN_OR_RETURN(local.theta, PositiveNumberOr(c, "rope_local_base_freq", 10000.0));
    s.local_rope = local;
  }
  SLM_RETURN_IF_ERROR(ParseSpecialIds(c, &s));
  return s;
}

Status CheckContextSupported(const ModelSpec& spec, int64_t max_context_len) {
  if (max_context_len < 1) {
    return InvalidArgument(spec.architecture + ": max context is " + std::to_string(max_context_len) +
                           ", expected >= 1");
  }
  return Status::Ok();
}

int64_t LongestStaticContext(const ModelSpec& spec) { return spec.max_position_embeddings; }

Status ApplyGenerationConfig(const json& generation_config, const std::string& source_name,
                             ModelSpec* spec) {
  if (!generation_config.is_object()) {
    return InvalidArgument(source_name + ": is " + io::DescribeJson(generation_config) +
                           ", expected a JSON object");
  }
  SLM_RETURN_IF_ERROR(OverrideSpecialIds(JsonObject(generation_config, source_name), spec));
  spec->generation_defaults = generation_config;
  return Status::Ok();
}

Status ApplyTokenizerConfig(const json& tokenizer_config, const std::string& source_name,
                            ModelSpec* spec) {
  if (!tokenizer_config.is_object()) {
    return InvalidArgument(source_name + ": is " + io::DescribeJson(tokenizer_config) +
                           ", expected a JSON object");
  }
  JsonObject c(tokenizer_config, source_name);
  SLM_ASSIGN_OR_RETURN(spec->add_bos, c.BoolOr("add_bos_token", true));
  SLM_ASSIGN_OR_RETURN(spec->add_eos, c.BoolOr("add_eos_token", false));
  spec->chat_template.clear();
  spec->chat_templates.clear();
  const json* tmpl = c.Get("chat_template");
  if (tmpl == nullptr) return Status::Ok();
  if (tmpl->is_string()) {
    spec->chat_template = tmpl->get<std::string>();
    return Status::Ok();
  }
  // Named templates, [{"name": ..., "template": ...}] (transformers' legacy save format for a
  // dict of templates): all are kept; transformers applies the one named "default" when the
  // caller names none. A repeated name keeps the later entry, as the dict it came from would.
  if (!tmpl->is_array()) {
    return InvalidArgument(c.Where("chat_template") + " is " + io::DescribeJson(*tmpl) +
                           ", expected a string or a list of named templates");
  }
  for (size_t i = 0; i < tmpl->size(); ++i) {
    const json& entry = (*tmpl)[i];
    const std::string field = "chat_template[" + std::to_string(i) + "]";
    if (!entry.is_object()) {
      return InvalidArgument(c.Where(field) + " is " + io::DescribeJson(entry) +
                             ", expected {\"name\": ..., \"template\": ...}");
    }
    JsonObject named(entry, source_name, field + ".");
    SLM_ASSIGN_OR_RETURN(std::string name, named.String("name"));
    SLM_ASSIGN_OR_RETURN(spec->chat_templates[name], named.String("template"));
  }
  if (auto it = spec->chat_templates.find("default"); it != spec->chat_templates.end()) {
    spec->chat_template = it->second;
  }
  return Status::Ok();
}

Result<ModelSpec> LoadModelSpec(const std::string& checkpoint_dir) {
  std::error_code ec;
  if (!fs::is_directory(checkpoint_dir, ec)) {
    return NotFound(checkpoint_dir + ": no such checkpoint directory");
  }
  const fs::path dir(checkpoint_dir);
  const std::string config_path = (dir / "config.json").string();
  if (!IsFile(config_path)) {
    if (fs::is_directory(config_path, ec)) {
      return InvalidArgument(config_path + ": is a directory, expected a file");
    }
    return NotFound(config_path + ": no such file (a Hugging Face checkpoint needs config.json)");
  }
  SLM_ASSIGN_OR_RETURN(json config, io::ReadJsonFile(config_path));
  SLM_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(config, config_path));

  const std::string generation_path = (dir / "generation_config.json").string();
  if (IsFile(generation_path)) {
    SLM_ASSIGN_OR_RETURN(json generation, io::ReadJsonFile(generation_path));
    SLM_RETURN_IF_ERROR(ApplyGenerationConfig(generation, generation_path, &spec));
  }
  const std::string tokenizer_path = (dir / "tokenizer_config.json").string();
  if (IsFile(tokenizer_path)) {
    SLM_ASSIGN_OR_RETURN(json tokenizer, io::ReadJsonFile(tokenizer_path));
    SLM_RETURN_IF_ERROR(ApplyTokenizerConfig(tokenizer, tokenizer_path, &spec));
  }
  // Newer transformers versions save templates beside tokenizer_config.json, not in it, and
  // files win over the config's entry (PreTrainedTokenizerBase._from_pretrained).
  std::map<std::string, std::string> files;
  const std::string jinja_path = (dir / "chat_template.jinja").string();
  if (IsFile(jinja_path)) {
    SLM_ASSIGN_OR_RETURN(files["default"], ReadTemplateFile(jinja_path));
  }
  const fs::path extra_dir = dir / "additional_chat_templates";
  if (fs::is_directory(extra_dir, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(extra_dir, ec)) {
      const fs::path& p = e.path();
      if (p.extension() != ".jinja" || !IsFile(p.string())) continue;
      SLM_ASSIGN_OR_RETURN(files[p.stem().string()], ReadTemplateFile(p.string()));
    }
  }
  if (!files.empty()) {
    auto it = files.find("default");
    spec.chat_template = it != files.end() ? it->second : "";
    // One default template is a plain string in transformers; anything else is a dict.
    spec.chat_templates.clear();
    if (!(files.size() == 1 && it != files.end())) spec.chat_templates = std::move(files);
  }
  return spec;
}

}  // namespace slm::model
