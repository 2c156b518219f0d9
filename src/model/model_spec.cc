#include "model/model_spec.h"

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

struct ArchitectureEntry {
  const char* architecture;
  const char* model_type;
};
// One entry per architecture whose graph the builder knows; appended as families land.
constexpr ArchitectureEntry kArchitectures[] = {
    {"LlamaForCausalLM", "llama"},
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
      if (model_type == e.model_type) return e;
    }
    name = "model_type " + model_type;
  }
  return Unsupported(c.source() + ": architecture '" + name +
                     "' is not supported; supported: " + JoinSupported());
}

Status ParseDims(const JsonObject& c, ModelSpec* s) {
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
  } else if (s->hidden_size % s->num_heads != 0) {
    return InvalidArgument(c.source() + ": hidden_size " + std::to_string(s->hidden_size) +
                           " is not a multiple of num_attention_heads " +
                           std::to_string(s->num_heads) + " and head_dim is not set");
  } else {
    s->head_dim = s->hidden_size / s->num_heads;
  }
  return Status::Ok();
}

Status ParseLayerOptions(const JsonObject& c, ModelSpec* s) {
  SLM_ASSIGN_OR_RETURN(s->rms_norm_eps, PositiveNumberOr(c, "rms_norm_eps", 1e-6));
  SLM_ASSIGN_OR_RETURN(s->tie_word_embeddings, c.BoolOr("tie_word_embeddings", false));
  SLM_ASSIGN_OR_RETURN(s->attention_bias, c.BoolOr("attention_bias", false));
  SLM_ASSIGN_OR_RETURN(s->mlp_bias, c.BoolOr("mlp_bias", false));
  SLM_ASSIGN_OR_RETURN(s->hidden_act, c.StringOr("hidden_act", "silu"));
  if (s->hidden_act != "silu") {
    return Unsupported(c.Where("hidden_act") + " is '" + s->hidden_act + "', not supported for " +
                       s->architecture + "; supported: silu");
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
  } else {
    return Unsupported(r.Where("rope_type") + " is '" + type +
                       "', not supported; supported: default, linear, llama3");
  }
  if (r.Has("rope_theta")) {
    SLM_ASSIGN_OR_RETURN(rope->theta, r.Number("rope_theta"));
  }
  return Status::Ok();
}

// _compute_*_rope_parameters read rope_theta, partial_rotary_factor and rope_scaling.
Result<RopeSpec> ParseRope(const JsonObject& c, int64_t head_dim) {
  RopeSpec rope;
  SLM_ASSIGN_OR_RETURN(rope.theta, c.NumberOr("rope_theta", 10000.0));
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
  }
  Status valid = ValidateRopeSpec(rope);
  if (!valid.ok()) return Status(valid.code(), c.source() + ": " + valid.message());
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
  SLM_RETURN_IF_ERROR(ParseDims(c, &s));
  SLM_RETURN_IF_ERROR(ParseLayerOptions(c, &s));
  SLM_ASSIGN_OR_RETURN(s.rope, ParseRope(c, s.head_dim));
  SLM_RETURN_IF_ERROR(ParseSpecialIds(c, &s));
  return s;
}

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
  const json* tmpl = c.Get("chat_template");
  if (tmpl == nullptr) return Status::Ok();
  if (tmpl->is_string()) {
    spec->chat_template = tmpl->get<std::string>();
    return Status::Ok();
  }
  // Older tokenizers store named templates, [{"name": ..., "template": ...}]; transformers
  // applies the one named "default" when the caller names none.
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
    if (name == "default") {
      SLM_ASSIGN_OR_RETURN(spec->chat_template, named.String("template"));
    }
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
  // Newer transformers versions save the template beside tokenizer_config.json, not in it.
  const std::string jinja_path = (dir / "chat_template.jinja").string();
  if (spec.chat_template.empty() && IsFile(jinja_path)) {
    SLM_ASSIGN_OR_RETURN(spec.chat_template, ReadFileToString(jinja_path));
  }
  return spec;
}

}  // namespace slm::model
