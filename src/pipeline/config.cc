#include "pipeline/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace slm::pipeline {
namespace {

nlohmann::json ScalarToJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end != nullptr && *end == '\0') return v;
  }
  {
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != nullptr && *end == '\0' && s.find_first_of("0123456789") != std::string::npos) return d;
  }
  return s;
}

Result<nlohmann::json> Convert(const YAML::Node& n, const std::string& path, ConfigDoc& doc) {
  if (!path.empty() && !doc.lines.count(path)) doc.lines[path] = n.Mark().line + 1;
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nlohmann::json(nullptr);
    case YAML::NodeType::Scalar:
      return ScalarToJson(n);
    case YAML::NodeType::Sequence: {
      nlohmann::json arr = nlohmann::json::array();
      size_t i = 0;
      for (const YAML::Node& item : n) {
        SLM_ASSIGN_OR_RETURN(nlohmann::json v, Convert(item, path + "[" + std::to_string(i++) + "]", doc));
        arr.push_back(std::move(v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      nlohmann::json obj = nlohmann::json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {
          return ParseError(doc.source + ":" + std::to_string(kv.first.Mark().line + 1) +
                            ": map keys must be plain names");
        }
        const std::string key = kv.first.Scalar();
        const std::string child = path.empty() ? key : path + "." + key;
        if (obj.contains(key)) {
          return ParseError(doc.source + ":" + std::to_string(kv.first.Mark().line + 1) + ": " + child +
                            ": key given twice");
        }
        doc.lines[child] = kv.first.Mark().line + 1;
        SLM_ASSIGN_OR_RETURN(nlohmann::json v, Convert(kv.second, child, doc));
        obj[key] = std::move(v);
      }
      return obj;
    }
  }
  return nlohmann::json(nullptr);
}

}  // namespace

Result<ConfigDoc> ParseYamlConfig(const std::string& text, const std::string& source_name,
                                  const std::string& base_dir) {
  ConfigDoc doc;
  doc.source = source_name;
  doc.base_dir = base_dir;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return ParseError(source_name + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) return ParseError(source_name + ": the top level must be a map of keys (model, stages, ...)");
  SLM_ASSIGN_OR_RETURN(doc.root, Convert(root, "", doc));
  return doc;
}

Result<ConfigDoc> LoadYamlConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open the pipeline config");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string base = std::filesystem::path(path).parent_path().string();
  return ParseYamlConfig(ss.str(), path, base.empty() ? "." : base);
}

int Diagnostics::LineOf(const std::string& key) const {
  if (doc_ == nullptr) return 0;
  std::string k = key;
  while (!k.empty()) {
    auto it = doc_->lines.find(k);
    if (it != doc_->lines.end()) return it->second;
    size_t cut = k.find_last_of(".[");
    if (cut == std::string::npos) break;
    k.resize(cut);
  }
  return 0;
}

void Diagnostics::Add(const std::string& key, const std::string& problem) {
  std::string where = doc_ != nullptr && !doc_->source.empty() ? doc_->source : "config";
  const int line = LineOf(key);
  if (line > 0) where += ":" + std::to_string(line);
  entries_.push_back(where + ": " + key + ": " + problem);
}

Status Diagnostics::ToStatus(const std::string& what) const {
  if (entries_.empty()) return Status::Ok();
  std::string msg = what + " (" + std::to_string(entries_.size()) + " problem" +
                    (entries_.size() == 1 ? "" : "s") + "):";
  for (const auto& e : entries_) msg += "\n  " + e;
  return InvalidArgument(msg);
}

std::string DescribeJson(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string: return "a string " + v.dump();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer " + v.dump();
    case nlohmann::json::value_t::number_float: return "a number " + v.dump();
    case nlohmann::json::value_t::boolean: return "a boolean " + v.dump();
    case nlohmann::json::value_t::null: return "nothing (null)";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::object: return "a map";
    default: return "a value";
  }
}

Options::Options(const nlohmann::json* object, std::string path, Diagnostics* diag, std::string base_dir)
    : obj_(object), path_(std::move(path)), diag_(diag), base_dir_(std::move(base_dir)) {
  if (obj_ == nullptr || obj_->is_null()) obj_ = &empty_;
}

bool Options::Has(const std::string& key) const { return obj_->is_object() && obj_->contains(key); }

const nlohmann::json* Options::Get(const std::string& key) {
  used_.push_back(key);
  if (!obj_->is_object()) return nullptr;
  auto it = obj_->find(key);
  if (it == obj_->end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Options::String(const std::string& key, const std::string& def) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return def;
  if (!v->is_string()) {
    Error(key, "expected a string, found " + DescribeJson(*v));
    return def;
  }
  return v->get<std::string>();
}

std::string Options::RequiredString(const std::string& key) {
  if (Get(key) == nullptr) {
    Error(key, "missing (required)");
    return "";
  }
  return String(key);
}

int64_t Options::Int(const std::string& key, int64_t def, int64_t min, int64_t max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return def;
  if (!v->is_number_integer()) {
    Error(key, "expected an integer, found " + DescribeJson(*v));
    return def;
  }
  const int64_t x = v->get<int64_t>();
  if (x < min || x > max) {
    Error(key, "expected an integer in [" + std::to_string(min) + ", " +
                   (max == INT64_MAX ? std::string("∞") : std::to_string(max)) + "], found " + std::to_string(x));
    return def;
  }
  return x;
}

double Options::Double(const std::string& key, double def) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return def;
  if (!v->is_number()) {
    Error(key, "expected a number, found " + DescribeJson(*v));
    return def;
  }
  return v->get<double>();
}

bool Options::Bool(const std::string& key, bool def) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return def;
  if (!v->is_boolean()) {
    Error(key, "expected true or false, found " + DescribeJson(*v));
    return def;
  }
  return v->get<bool>();
}

std::vector<int64_t> Options::IntList(const std::string& key, std::vector<int64_t> def) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return def;
  if (v->is_number_integer()) return {v->get<int64_t>()};
  if (!v->is_array()) {
    Error(key, "expected a list of integers, found " + DescribeJson(*v));
    return def;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number_integer()) {
      Error(key + "[" + std::to_string(i) + "]", "expected an integer, found " + DescribeJson((*v)[i]));
      return def;
    }
    out.push_back((*v)[i].get<int64_t>());
  }
  return out;
}

std::vector<std::string> Options::StringList(const std::string& key, std::vector<std::string> def) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return def;
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) {
    Error(key, "expected a list of strings, found " + DescribeJson(*v));
    return def;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      Error(key + "[" + std::to_string(i) + "]", "expected a string, found " + DescribeJson((*v)[i]));
      return def;
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::string Options::Path(const std::string& key, const std::string& def) {
  std::string p = String(key, def);
  if (p.empty() || p[0] == '/') return p;
  return (std::filesystem::path(base_dir_) / p).lexically_normal().string();
}

Options Options::Child(const std::string& key) {
  const nlohmann::json* v = Get(key);
  if (v != nullptr && !v->is_object()) {
    Error(key, "expected a map of options, found " + DescribeJson(*v));
    v = nullptr;
  }
  return Options(v, KeyPath(key), diag_, base_dir_);
}

nlohmann::json Options::Raw(const std::string& key) {
  const nlohmann::json* v = Get(key);
  return v == nullptr ? nlohmann::json(nullptr) : *v;
}

void Options::RejectUnknown() {
  if (!obj_->is_object()) return;
  for (auto it = obj_->begin(); it != obj_->end(); ++it) {
    if (std::find(used_.begin(), used_.end(), it.key()) == used_.end()) {
      std::string known;
      for (const auto& u : used_) known += (known.empty() ? "" : ", ") + u;
      Error(it.key(), "unknown key (known here: " + known + ")");
    }
  }
}

}  // namespace slm::pipeline
