#include "io/contract_metadata.h"

namespace slm::io {
namespace {

using nlohmann::json;

std::string TypeName(const json& j) { return j.type_name(); }

// Small typed accessors that turn every type mismatch into a Status naming the field path.
class Reader {
 public:
  explicit Reader(std::string prefix) : prefix_(std::move(prefix)) {}

  Result<const json*> Field(const json& obj, const char* key, bool required = true) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) return ParseError("metadata: missing field '" + Path(key) + "'");
      return static_cast<const json*>(nullptr);
    }
    return &*it;
  }
  Result<int64_t> Int(const json& obj, const char* key) const {
    SLM_ASSIGN_OR_RETURN(const json* j, Field(obj, key));
    if (!j->is_number_integer()) return Mismatch(key, "an integer", *j);
    return j->get<int64_t>();
  }
  Result<std::string> Str(const json& obj, const char* key) const {
    SLM_ASSIGN_OR_RETURN(const json* j, Field(obj, key));
    if (!j->is_string()) return Mismatch(key, "a string", *j);
    return j->get<std::string>();
  }
  Result<const json*> Array(const json& obj, const char* key) const {
    SLM_ASSIGN_OR_RETURN(const json* j, Field(obj, key));
    if (!j->is_array()) return Mismatch(key, "an array", *j);
    return j;
  }
  Result<const json*> Object(const json& obj, const char* key) const {
    SLM_ASSIGN_OR_RETURN(const json* j, Field(obj, key));
    if (!j->is_object()) return Mismatch(key, "an object", *j);
    return j;
  }
  Reader Sub(const std::string& key) const { return Reader(Path(key)); }
  std::string Path(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }
  Status Mismatch(const std::string& key, const char* expected, const json& found) const {
    return ParseError("metadata: field '" + Path(key) + "': expected " + expected + ", found " +
                      TypeName(found) + " " + found.dump().substr(0, 40));
  }

 private:
  std::string prefix_;
};

Status CheckInt32(const Reader& r, const std::string& key, int64_t v) {
  if (v < INT32_MIN || v > INT32_MAX) {
    return OutOfRange("metadata: field '" + r.Path(key) + "' = " + std::to_string(v) +
                      " does not fit in int32");
  }
  return Status::Ok();
}

Result<ContractMetadata> Parse(const json& root) {
  ContractMetadata m;
  Reader r("");
  if (!root.is_object()) return ParseError("metadata: expected a JSON object at the top level");
  SLM_ASSIGN_OR_RETURN(m.contract, r.Str(root, "contract"));
  SLM_ASSIGN_OR_RETURN(m.version, r.Int(root, "version"));
  SLM_ASSIGN_OR_RETURN(m.max_context_len, r.Int(root, "max_context_len"));
  SLM_ASSIGN_OR_RETURN(m.vocab_size, r.Int(root, "vocab_size"));
  SLM_ASSIGN_OR_RETURN(const json* bos, r.Field(root, "bos_id", false));
  if (bos && !bos->is_null()) {
    if (!bos->is_number_integer()) return r.Mismatch("bos_id", "an integer or null", *bos);
    SLM_RETURN_IF_ERROR(CheckInt32(r, "bos_id", bos->get<int64_t>()));
    m.bos_id = bos->get<int32_t>();
  }
  SLM_ASSIGN_OR_RETURN(const json* eos, r.Array(root, "eos_ids"));
  for (size_t i = 0; i < eos->size(); ++i) {
    const json& e = (*eos)[i];
    std::string key = "eos_ids[" + std::to_string(i) + "]";
    if (!e.is_number_integer()) return r.Mismatch(key, "an integer", e);
    SLM_RETURN_IF_ERROR(CheckInt32(r, key, e.get<int64_t>()));
    m.eos_ids.push_back(e.get<int32_t>());
  }
  // Required; null = the model has no pad token.
  SLM_ASSIGN_OR_RETURN(const json* pad, r.Field(root, "pad_id"));
  if (!pad->is_null()) {
    if (!pad->is_number_integer()) return r.Mismatch("pad_id", "an integer or null", *pad);
    SLM_RETURN_IF_ERROR(CheckInt32(r, "pad_id", pad->get<int64_t>()));
    m.pad_id = static_cast<int32_t>(pad->get<int64_t>());
  }
  SLM_ASSIGN_OR_RETURN(const json* add_bos, r.Field(root, "add_bos"));
  if (!add_bos->is_boolean()) return r.Mismatch("add_bos", "a boolean", *add_bos);
  m.add_bos = add_bos->get<bool>();
  SLM_ASSIGN_OR_RETURN(const json* add_eos, r.Field(root, "add_eos", false));
  if (add_eos) {
    if (!add_eos->is_boolean()) return r.Mismatch("add_eos", "a boolean", *add_eos);
    m.add_eos = add_eos->get<bool>();
  }
  SLM_ASSIGN_OR_RETURN(const json* eos_suffix, r.Field(root, "add_eos_ids", false));
  if (eos_suffix) {
    if (!eos_suffix->is_array()) return r.Mismatch("add_eos_ids", "an array", *eos_suffix);
    for (size_t i = 0; i < eos_suffix->size(); ++i) {
      const json& e = (*eos_suffix)[i];
      const std::string key = "add_eos_ids[" + std::to_string(i) + "]";
      if (!e.is_number_integer()) return r.Mismatch(key, "an integer", e);
      SLM_RETURN_IF_ERROR(CheckInt32(r, key, e.get<int64_t>()));
      m.add_eos_ids.push_back(e.get<int32_t>());
    }
  }

  SLM_ASSIGN_OR_RETURN(const json* methods, r.Array(root, "methods"));
  for (size_t i = 0; i < methods->size(); ++i) {
    Reader mr = r.Sub("methods[" + std::to_string(i) + "]");
    const json& mj = (*methods)[i];
    if (!mj.is_object()) return r.Mismatch("methods[" + std::to_string(i) + "]", "an object", mj);
    MethodInfo mi;
    SLM_ASSIGN_OR_RETURN(mi.name, mr.Str(mj, "name"));
    SLM_ASSIGN_OR_RETURN(mi.role, mr.Str(mj, "role"));
    SLM_ASSIGN_OR_RETURN(mi.step, mr.Int(mj, "step"));
    SLM_ASSIGN_OR_RETURN(mi.logits_mode, mr.Str(mj, "logits_mode"));
    m.methods.push_back(std::move(mi));
  }
  SLM_ASSIGN_OR_RETURN(const json* logits, r.Object(root, "logits"));
  SLM_ASSIGN_OR_RETURN(m.logits_output, r.Sub("logits").Str(*logits, "output"));

  SLM_ASSIGN_OR_RETURN(const json* cache, r.Object(root, "cache"));
  Reader cr = r.Sub("cache");
  SLM_ASSIGN_OR_RETURN(m.cache_dtype, cr.Str(*cache, "dtype"));
  SLM_ASSIGN_OR_RETURN(const json* format, cr.Field(*cache, "format", false));
  if (format) {
    if (!format->is_string()) return cr.Mismatch("format", "a string", *format);
    m.cache_format = format->get<std::string>();
  }
  SLM_ASSIGN_OR_RETURN(const json* extra, cr.Field(*cache, "extra_states", false));
  if (extra) {
    if (!extra->is_array()) return cr.Mismatch("extra_states", "an array", *extra);
    for (size_t i = 0; i < extra->size(); ++i) {
      const std::string key = "extra_states[" + std::to_string(i) + "]";
      const json& ej = (*extra)[i];
      if (!ej.is_object()) return cr.Mismatch(key, "an object", ej);
      Reader er = cr.Sub(key);
      CacheExtraState e;
      SLM_ASSIGN_OR_RETURN(e.name, er.Str(ej, "name"));
      SLM_ASSIGN_OR_RETURN(e.scales, er.Str(ej, "scales"));
      SLM_ASSIGN_OR_RETURN(e.dtype, er.Str(ej, "dtype"));
      SLM_ASSIGN_OR_RETURN(const json* shape, er.Array(ej, "shape"));
      for (size_t d = 0; d < shape->size(); ++d) {
        if (!(*shape)[d].is_number_integer()) return er.Mismatch("shape[" + std::to_string(d) + "]", "an integer", (*shape)[d]);
        e.shape.push_back((*shape)[d].get<int64_t>());
      }
      m.cache_extra_states.push_back(std::move(e));
    }
  }
  SLM_ASSIGN_OR_RETURN(const json* groups, cr.Array(*cache, "groups"));
  for (size_t i = 0; i < groups->size(); ++i) {
    Reader gr = cr.Sub("groups[" + std::to_string(i) + "]");
    const json& gj = (*groups)[i];
    if (!gj.is_object()) return cr.Mismatch("groups[" + std::to_string(i) + "]", "an object", gj);
    CacheGroup g;
    SLM_ASSIGN_OR_RETURN(g.name, gr.Str(gj, "name"));
    SLM_ASSIGN_OR_RETURN(g.cache_len, gr.Int(gj, "cache_len"));
    SLM_ASSIGN_OR_RETURN(g.window, gr.Int(gj, "window"));
    m.groups.push_back(std::move(g));
  }
  SLM_ASSIGN_OR_RETURN(const json* layers, cr.Array(*cache, "layers"));
  for (size_t i = 0; i < layers->size(); ++i) {
    Reader lr = cr.Sub("layers[" + std::to_string(i) + "]");
    const json& lj = (*layers)[i];
    if (!lj.is_object()) return cr.Mismatch("layers[" + std::to_string(i) + "]", "an object", lj);
    CacheLayer l;
    SLM_ASSIGN_OR_RETURN(l.group, lr.Str(lj, "group"));
    SLM_ASSIGN_OR_RETURN(l.n_kv_heads, lr.Int(lj, "n_kv_heads"));
    SLM_ASSIGN_OR_RETURN(l.head_dim, lr.Int(lj, "head_dim"));
    m.layers.push_back(std::move(l));
  }
  SLM_ASSIGN_OR_RETURN(const json* so, r.Field(root, "state_outputs", false));
  if (so) {
    if (!so->is_array()) return r.Mismatch("state_outputs", "an array", *so);
    for (size_t i = 0; i < so->size(); ++i) {
      const std::string key = "state_outputs[" + std::to_string(i) + "]";
      const json& sj = (*so)[i];
      if (!sj.is_object()) return r.Mismatch(key, "an object", sj);
      StateOutput s;
      SLM_ASSIGN_OR_RETURN(s.output, r.Sub(key).Str(sj, "output"));
      SLM_ASSIGN_OR_RETURN(s.binds, r.Sub(key).Str(sj, "binds"));
      m.state_outputs.push_back(std::move(s));
    }
  }
  SLM_ASSIGN_OR_RETURN(const json* tok, r.Field(root, "tokenizer", false));
  if (tok) {
    if (!tok->is_object()) return r.Mismatch("tokenizer", "an object", *tok);
    SLM_ASSIGN_OR_RETURN(m.tokenizer_kind, r.Sub("tokenizer").Str(*tok, "kind"));
  }
  SLM_ASSIGN_OR_RETURN(const json* tmpl, r.Field(root, "chat_template", false));
  if (tmpl && !tmpl->is_null()) {
    if (!tmpl->is_string()) return r.Mismatch("chat_template", "a string", *tmpl);
    m.chat_template = tmpl->get<std::string>();
  }
  SLM_ASSIGN_OR_RETURN(const json* named, r.Field(root, "chat_templates", false));
  if (named && !named->is_null()) {
    if (!named->is_object()) return r.Mismatch("chat_templates", "an object of name: template", *named);
    for (auto it = named->begin(); it != named->end(); ++it) {
      if (!it->is_string()) return r.Sub("chat_templates").Mismatch(it.key(), "a string", *it);
      m.chat_templates[it.key()] = it->get<std::string>();
    }
  }
  SLM_ASSIGN_OR_RETURN(const json* gen, r.Field(root, "generation_defaults", false));
  if (gen) {
    if (!gen->is_object()) return r.Mismatch("generation_defaults", "an object", *gen);
    m.generation_defaults = *gen;
  }
  SLM_ASSIGN_OR_RETURN(const json* model, r.Field(root, "model", false));
  if (model && model->is_object()) m.model = *model;
  return m;
}

}  // namespace

std::string KvScaleStateName(char kv, int64_t layer) {
  return std::string(1, kv) + "_scale." + std::to_string(layer);
}

const CacheGroup* ContractMetadata::FindGroup(const std::string& n) const {
  for (const CacheGroup& g : groups) {
    if (g.name == n) return &g;
  }
  return nullptr;
}

const MethodInfo* ContractMetadata::FindMethod(const std::string& n) const {
  for (const MethodInfo& mi : methods) {
    if (mi.name == n) return &mi;
  }
  return nullptr;
}

nlohmann::json ContractMetadata::ToJson() const {
  json j;
  j["contract"] = contract;
  j["version"] = version;
  j["max_context_len"] = max_context_len;
  j["vocab_size"] = vocab_size;
  j["bos_id"] = bos_id ? json(*bos_id) : json(nullptr);
  j["eos_ids"] = eos_ids;
  j["pad_id"] = pad_id ? json(*pad_id) : json(nullptr);
  j["add_bos"] = add_bos;
  j["add_eos"] = add_eos;
  j["add_eos_ids"] = add_eos_ids;
  j["methods"] = json::array();
  for (const MethodInfo& mi : methods) {
    j["methods"].push_back(
        {{"name", mi.name}, {"role", mi.role}, {"step", mi.step}, {"logits_mode", mi.logits_mode}});
  }
  // The prefill methods' mode is the artifact's mode (decode's step-1 output has the same
  // [1, 1, V] shape either way).
  std::string mode = "all";
  for (const MethodInfo& mi : methods) {
    if (mi.role == "prefill") mode = mi.logits_mode;
  }
  j["logits"] = {{"output", logits_output}, {"mode", mode}};
  json cache;
  cache["dtype"] = cache_dtype;
  if (!cache_format.empty()) cache["format"] = cache_format;
  if (!cache_extra_states.empty()) {
    cache["extra_states"] = json::array();
    for (const CacheExtraState& e : cache_extra_states) {
      cache["extra_states"].push_back({{"name", e.name}, {"scales", e.scales}, {"dtype", e.dtype}, {"shape", e.shape}});
    }
  }
  cache["groups"] = json::array();
  for (const CacheGroup& g : groups) {
    cache["groups"].push_back({{"name", g.name}, {"cache_len", g.cache_len}, {"window", g.window}});
  }
  cache["layers"] = json::array();
  for (const CacheLayer& l : layers) {
    cache["layers"].push_back({{"group", l.group}, {"n_kv_heads", l.n_kv_heads}, {"head_dim", l.head_dim}});
  }
  j["cache"] = cache;
  j["state_outputs"] = json::array();
  for (const StateOutput& s : state_outputs) {
    j["state_outputs"].push_back({{"output", s.output}, {"binds", s.binds}});
  }
  j["tokenizer"] = {{"kind", tokenizer_kind}, {"embedded", !tokenizer_kind.empty()}};
  j["chat_template"] = chat_template;
  j["chat_templates"] = json::object();
  for (const auto& [name, text] : chat_templates) j["chat_templates"][name] = text;
  j["generation_defaults"] = generation_defaults;
  j["model"] = model;
  return j;
}

Result<ContractMetadata> ContractMetadata::FromJson(const std::string& text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return ParseError("metadata: not valid JSON");
  try {
    return Parse(root);
  } catch (const json::exception& e) {
    return ParseError(std::string("metadata: ") + e.what());
  }
}

}  // namespace slm::io
