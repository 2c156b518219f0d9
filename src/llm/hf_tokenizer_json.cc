#include "llm/hf_tokenizer_json.h"

#include <charconv>
#include <set>

#include "io/json_util.h"

namespace slm::llm {
namespace {

using nlohmann::json;

Result<AddedToken> ParseAddedToken(const json& j, const std::string& where) {
  if (!j.is_object()) return ParseError(where + " is " + io::DescribeJson(j) + ", expected an object");
  AddedToken a;
  auto content = j.find("content");
  if (content == j.end() || !content->is_string()) {
    return ParseError(where + ".content is missing or not a string");
  }
  a.content = content->get<std::string>();
  if (auto id = j.find("id"); id != j.end()) {
    if (!id->is_number_integer()) return ParseError(where + ".id is " + io::DescribeJson(*id) + ", expected an integer");
    a.id = id->get<int32_t>();
  }
  a.special = io::BoolFieldOr(j, "special", false);
  a.lstrip = io::BoolFieldOr(j, "lstrip", false);
  a.rstrip = io::BoolFieldOr(j, "rstrip", false);
  // tokenizers' default: normalized unless special.
  a.normalized = io::BoolFieldOr(j, "normalized", !a.special);
  a.single_word = io::BoolFieldOr(j, "single_word", false);
  return a;
}

Result<DecoderConfig> ParseDecoder(const json& j, const std::string& source) {
  DecoderConfig d;
  if (j.is_null()) return d;
  bool fuse_seen = false;
  std::vector<std::pair<const json*, std::string>> steps;
  if (j.is_object() && j.value("type", "") == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return ParseError(source + ": decoder.decoders is missing or not a list");
    for (size_t i = 0; i < it->size(); ++i) steps.emplace_back(&(*it)[i], "decoder.decoders[" + std::to_string(i) + "]");
  } else {
    steps.emplace_back(&j, "decoder");
  }
  for (const auto& [step, field] : steps) {
    if (!step->is_object() || !step->contains("type") || !(*step)["type"].is_string()) {
      return ParseError(source + ": " + field + " is " + io::DescribeJson(*step) + ", expected an object with a type");
    }
    const std::string type = (*step)["type"].get<std::string>();
    if (type == "ByteLevel") {
      d.byte_level = true;
    } else if (type == "ByteFallback") {
      d.byte_fallback = true;
    } else if (type == "Fuse") {
      fuse_seen = true;
    } else if (type == "Replace") {
      const json& pattern = step->value("pattern", json());
      if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string()) {
        return Unsupported(source + ": " + field + " Replace pattern " + io::DescribeJson(pattern) +
                           " is not supported (only {\"String\": ...} patterns)");
      }
      d.replacements.emplace_back(pattern["String"].get<std::string>(), step->value("content", ""));
    } else if (type == "Strip") {
      d.strip_content = step->value("content", " ");
      d.strip_start = step->value("start", 0);
      d.strip_stop = step->value("stop", 0);
      d.strip_per_token = !fuse_seen;
    } else if (type == "Metaspace") {
      const std::string replacement = step->value("replacement", "\xE2\x96\x81");
      d.replacements.emplace_back(replacement, " ");
      bool prefix = io::BoolFieldOr(*step, "add_prefix_space", true);
      if (auto s = step->find("prepend_scheme"); s != step->end() && s->is_string()) {
        prefix = s->get<std::string>() != "never";
      }
      // Metaspace drops the prefix space of the first token only.
      if (prefix) {
        d.strip_content = " ";
        d.strip_start = 1;
        d.strip_per_token = false;
      }
    } else {
      return Unsupported(source + ": " + field + " type '" + type +
                         "' is not supported (supported: ByteLevel, Metaspace, Replace, ByteFallback, "
                         "Fuse, Strip, Sequence)");
    }
  }
  return d;
}

// post_processor → the special tokens added by add_special_tokens=True.
void ParsePostProcessor(const json& j, const std::string& source, SpecialTokenPolicy* policy) {
  if (j.is_null() || !j.is_object()) return;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    if (auto it = j.find("processors"); it != j.end() && it->is_array()) {
      for (const json& p : *it) ParsePostProcessor(p, source, policy);
    }
    return;
  }
  if (type == "TemplateProcessing") {
    const json& single = j.value("single", json::array());
    const json& specials = j.value("special_tokens", json::object());
    bool after_sequence = false;
    for (const json& item : single) {
      if (item.contains("Sequence")) {
        after_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken")) continue;
      const std::string name = item["SpecialToken"].value("id", "");
      auto sp = specials.find(name);
      if (sp == specials.end() || !sp->contains("ids") || !(*sp)["ids"].is_array()) {
        policy->unsupported = source + ": post_processor special token '" + name + "' has no ids";
        return;
      }
      for (const json& id : (*sp)["ids"]) (after_sequence ? policy->suffix : policy->prefix).push_back(id.get<int32_t>());
    }
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    if (j.contains("cls") && j["cls"].is_array() && j["cls"].size() == 2) policy->prefix.push_back(j["cls"][1].get<int32_t>());
    if (j.contains("sep") && j["sep"].is_array() && j["sep"].size() == 2) policy->suffix.push_back(j["sep"][1].get<int32_t>());
    return;
  }
  policy->unsupported = source + ": post_processor type '" + type + "' is not supported for adding special tokens";
}

// tokenizer_config.json's add_bos_token / add_eos_token override the file's template (as
// LlamaTokenizerFast.update_post_processor does).
void ApplyAddFlags(const BpeTokenizer& t, const TokenizerSideFiles& side, SpecialTokenPolicy* policy) {
  const json& c = side.tokenizer_config;
  if (!c.is_object()) return;
  if (auto it = c.find("add_bos_token"); it != c.end() && it->is_boolean()) {
    policy->prefix.clear();
    const auto bos = t.bos_id();
    if (it->get<bool>() && bos) policy->prefix.push_back(*bos);
  }
  if (auto it = c.find("add_eos_token"); it != c.end() && it->is_boolean()) {
    policy->suffix.clear();
    const auto eos = t.eos_id();
    if (it->get<bool>() && eos) policy->suffix.push_back(*eos);
  }
}

Result<std::pair<std::string, std::string>> ParseMergeLine(std::string_view line, const std::string& where) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 >= line.size() ||
      line.find(' ', space + 1) != std::string_view::npos) {
    return ParseError(where + " is '" + std::string(line) + "', expected two tokens separated by one space");
  }
  return std::make_pair(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
}

// Special tokens named in the side files (and the class's defaults) that are vocabulary
// entries become special added tokens, as slow tokenizers treat them.
void AddNamedSpecialTokens(const BpeModelConfig& model, const TokenizerSideFiles& side,
                           std::vector<std::string> defaults, std::vector<AddedToken>* added) {
  std::vector<std::string> names = std::move(defaults);
  for (const json* c : {&side.tokenizer_config, &side.special_tokens_map}) {
    if (!c->is_object()) continue;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      if (auto s = SpecialTokenContent(*c, key)) names.push_back(*s);
    }
    if (auto it = c->find("additional_special_tokens"); it != c->end() && it->is_array()) {
      for (const json& e : *it) {
        if (e.is_string()) names.push_back(e.get<std::string>());
        else if (e.is_object() && e.contains("content") && e["content"].is_string()) names.push_back(e["content"].get<std::string>());
      }
    }
  }
  std::set<std::string> have;
  for (const AddedToken& a : *added) have.insert(a.content);
  for (const std::string& name : names) {
    if (have.count(name)) continue;
    for (const auto& [token, id] : model.vocab) {
      if (token == name) {
        AddedToken a;
        a.id = id;
        a.content = name;
        a.special = true;
        added->push_back(a);
        have.insert(name);
        break;
      }
    }
  }
}

}  // namespace

std::optional<std::string> SpecialTokenContent(const json& config, const char* key) {
  if (!config.is_object()) return std::nullopt;
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

void ResolveSpecialIds(BpeTokenizer* t, const TokenizerSideFiles& side) {
  std::optional<int32_t> bos = t->bos_id(), eos = t->eos_id();
  for (const json* c : {&side.special_tokens_map, &side.tokenizer_config}) {
    if (auto s = SpecialTokenContent(*c, "bos_token")) {
      if (auto id = t->TokenToId(*s)) bos = id;
    }
    if (auto s = SpecialTokenContent(*c, "eos_token")) {
      if (auto id = t->TokenToId(*s)) eos = id;
    }
  }
  t->set_special_ids(bos, eos);
}

Result<std::vector<AddedToken>> ParseAddedTokensDecoder(const json& config, const std::string& source) {
  std::vector<AddedToken> out;
  if (!config.is_object()) return out;
  auto it = config.find("added_tokens_decoder");
  if (it == config.end()) return out;
  if (!it->is_object()) return ParseError(source + ": added_tokens_decoder is " + io::DescribeJson(*it) + ", expected an object");
  for (const auto& [key, value] : it->items()) {
    const std::string where = source + ": added_tokens_decoder[\"" + key + "\"]";
    SLM_ASSIGN_OR_RETURN(AddedToken a, ParseAddedToken(value, where));
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0) {
      return ParseError(where + ": the key is not a token id");
    }
    a.id = id;
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::unique_ptr<BpeTokenizer>> LoadHfTokenizerJson(std::string_view json_text,
                                                          const std::string& source,
                                                          const TokenizerSideFiles& side,
                                                          SpecialTokenPolicy* policy) {
  SLM_ASSIGN_OR_RETURN(json root, io::ParseJson(json_text, source));
  if (!root.is_object()) return ParseError(source + ": is " + io::DescribeJson(root) + ", expected a JSON object");
  BpeTokenizerConfig c;
  c.source = source;
  SLM_ASSIGN_OR_RETURN(c.normalizer, ParseNormalizer(root.value("normalizer", json()), source));
  SLM_ASSIGN_OR_RETURN(c.pre_tokenizer, ParsePreTokenizer(root.value("pre_tokenizer", json()), source));
  SLM_ASSIGN_OR_RETURN(c.decoder, ParseDecoder(root.value("decoder", json()), source));

  auto mit = root.find("model");
  if (mit == root.end() || !mit->is_object()) return ParseError(source + ": model is missing or not an object");
  const json& model = *mit;
  // Files written before "type" existed are BPE when they have merges.
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    return Unsupported(source + ": model type '" + type + "' is not supported (supported: BPE)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto it = model.find(key); it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      return Unsupported(source + ": model." + key + " " + io::DescribeJson(*it) + " is not supported (only null or \"\")");
    }
  }
  if (auto it = model.find("dropout"); it != model.end() && it->is_number() && it->get<double>() > 0) {
    return Unsupported(source + ": model.dropout " + io::DescribeJson(*it) + " is not supported (BPE dropout is random)");
  }
  auto vit = model.find("vocab");
  if (vit == model.end() || !vit->is_object()) return ParseError(source + ": model.vocab is missing or not an object");
  c.model.vocab.reserve(vit->size());
  for (const auto& [token, id] : vit->items()) {
    if (!id.is_number_integer()) return ParseError(source + ": model.vocab[\"" + token + "\"] is " + io::DescribeJson(id) + ", expected an id");
    c.model.vocab.emplace_back(token, id.get<int32_t>());
  }
  auto merges = model.find("merges");
  if (merges != model.end() && merges->is_array()) {
    c.model.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& m = (*merges)[i];
      const std::string where = source + ": model.merges[" + std::to_string(i) + "]";
      if (m.is_string()) {
        SLM_ASSIGN_OR_RETURN(auto pair, ParseMergeLine(m.get<std::string>(), where));
        c.model.merges.push_back(std::move(pair));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        c.model.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return ParseError(where + " is " + io::DescribeJson(m) + ", expected \"a b\" or [\"a\", \"b\"]");
      }
    }
  }
  c.model.byte_fallback = io::BoolFieldOr(model, "byte_fallback", false);
  c.model.fuse_unk = io::BoolFieldOr(model, "fuse_unk", false);
  c.model.ignore_merges = io::BoolFieldOr(model, "ignore_merges", false);
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) c.model.unk_token = it->get<std::string>();

  if (auto it = root.find("added_tokens"); it != root.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      SLM_ASSIGN_OR_RETURN(AddedToken a, ParseAddedToken((*it)[i], source + ": added_tokens[" + std::to_string(i) + "]"));
      c.added_tokens.push_back(std::move(a));
    }
  }
  SpecialTokenPolicy local;
  ParsePostProcessor(root.value("post_processor", json()), source, &local);
  if (!local.prefix.empty()) c.bos_id = local.prefix.front();
  if (!local.suffix.empty()) c.eos_id = local.suffix.back();
  SLM_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::Create(std::move(c)));
  ResolveSpecialIds(tokenizer.get(), side);
  ApplyAddFlags(*tokenizer, side, &local);
  if (policy) *policy = std::move(local);
  return tokenizer;
}

Result<std::unique_ptr<BpeTokenizer>> LoadVocabMergesTokenizer(std::string_view vocab_json,
                                                               std::string_view merges_txt,
                                                               const std::string& source,
                                                               const TokenizerSideFiles& side,
                                                               SpecialTokenPolicy* policy) {
  BpeTokenizerConfig c;
  c.source = source;
  SLM_ASSIGN_OR_RETURN(json vocab, io::ParseJson(vocab_json, source + " (vocab.json)"));
  if (!vocab.is_object()) return ParseError(source + " (vocab.json): is " + io::DescribeJson(vocab) + ", expected an object");
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer()) return ParseError(source + " (vocab.json): \"" + token + "\" is " + io::DescribeJson(id) + ", expected an id");
    c.model.vocab.emplace_back(token, id.get<int32_t>());
  }
  size_t line_no = 0, pos = 0;
  while (pos < merges_txt.size()) {
    size_t end = merges_txt.find('\n', pos);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    SLM_ASSIGN_OR_RETURN(auto pair, ParseMergeLine(line, source + " (merges.txt) line " + std::to_string(line_no)));
    c.model.merges.push_back(std::move(pair));
  }

  const json& config = side.tokenizer_config;
  std::string cls = config.is_object() ? config.value("tokenizer_class", "") : "";
  if (cls.ends_with("Fast")) cls.resize(cls.size() - 4);
  const bool add_prefix_space = io::BoolFieldOr(config, "add_prefix_space", false);
  std::string_view pattern;
  if (cls == "Qwen2Tokenizer") {
    pattern = kQwen2Pattern;
    SLM_ASSIGN_OR_RETURN(c.normalizer, MakeUnicodeNormalizer(UnicodeForm::kNFC));
  } else if (cls.empty() || cls == "GPT2Tokenizer" || cls == "CodeGenTokenizer" || cls == "GPTNeoXTokenizer") {
    pattern = kGpt2Pattern;
  } else {
    return Unsupported(source + ": tokenizer_config.json tokenizer_class '" + cls +
                       "' is not supported with vocab.json + merges.txt (supported: GPT2Tokenizer, "
                       "Qwen2Tokenizer, CodeGenTokenizer, GPTNeoXTokenizer)");
  }
  SLM_ASSIGN_OR_RETURN(c.pre_tokenizer, MakeRegexByteLevelPreTokenizer(pattern, add_prefix_space, source + " (pre-tokenizer regex)"));
  c.decoder.byte_level = true;
  SLM_ASSIGN_OR_RETURN(c.added_tokens, ParseAddedTokensDecoder(config, source + " (tokenizer_config.json)"));
  // GPT2Tokenizer's bos/eos/unk default to <|endoftext|>.
  std::vector<std::string> defaults;
  if (cls.empty() || cls == "GPT2Tokenizer" || cls == "CodeGenTokenizer") defaults.push_back("<|endoftext|>");
  AddNamedSpecialTokens(c.model, side, defaults, &c.added_tokens);
  SLM_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::Create(std::move(c)));
  ResolveSpecialIds(tokenizer.get(), side);
  if (!tokenizer->eos_id() && !defaults.empty()) {
    tokenizer->set_special_ids(tokenizer->TokenToId(defaults[0]), tokenizer->TokenToId(defaults[0]));
  }
  SpecialTokenPolicy local;  // GPT2Tokenizer / Qwen2Tokenizer add nothing unless configured
  ApplyAddFlags(*tokenizer, side, &local);
  if (policy) *policy = std::move(local);
  return tokenizer;
}

}  // namespace slm::llm
