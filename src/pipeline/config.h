// Pipeline configuration: a JSON tree (from YAML or built in C++) with the source line of every
// key, a collector of diagnostics that names key and line, and typed option readers that record
// every wrong type / unknown key instead of stopping at the first.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace slm::pipeline {

struct ConfigDoc {
  nlohmann::json root = nlohmann::json::object();
  std::map<std::string, int> lines;  // dotted key path ("stages.compilation.compiler.name") → 1-based line
  std::string source;                // file name for messages ("" when built in C++)
  std::string base_dir = ".";        // relative paths in the config resolve against this
};

// YAML → ConfigDoc. Plain scalars become int / float / bool / null when they parse as one;
// quoted scalars stay strings. Parse errors name the file and line.
Result<ConfigDoc> ParseYamlConfig(const std::string& text, const std::string& source_name,
                                  const std::string& base_dir);
Result<ConfigDoc> LoadYamlConfig(const std::string& path);

// Collects problems; ToStatus() reports all of them at once, one per line, each as
// "<file>:<line>: <key>: <problem>".
class Diagnostics {
 public:
  explicit Diagnostics(const ConfigDoc* doc) : doc_(doc) {}
  void Add(const std::string& key, const std::string& problem);
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  Status ToStatus(const std::string& what) const;
  // Line of `key`, or of its nearest ancestor present in the document; 0 if unknown.
  int LineOf(const std::string& key) const;

 private:
  const ConfigDoc* doc_;
  std::vector<std::string> entries_;
};

// A typed view of one JSON object in the config. Getters return the default (and record a
// diagnostic) on a wrong type; RejectUnknown() records every key that no getter asked for.
class Options {
 public:
  Options(const nlohmann::json* object, std::string path, Diagnostics* diag, std::string base_dir);

  bool Has(const std::string& key) const;
  std::string String(const std::string& key, const std::string& def = "");
  std::string RequiredString(const std::string& key);
  int64_t Int(const std::string& key, int64_t def, int64_t min = INT64_MIN, int64_t max = INT64_MAX);
  double Double(const std::string& key, double def);
  bool Bool(const std::string& key, bool def);
  std::vector<int64_t> IntList(const std::string& key, std::vector<int64_t> def);
  std::vector<std::string> StringList(const std::string& key, std::vector<std::string> def = {});
  // A string path, resolved against the config's directory when relative.
  std::string Path(const std::string& key, const std::string& def = "");
  // A nested object (absent → empty object).
  Options Child(const std::string& key);
  // The raw sub-tree (marks the key used).
  nlohmann::json Raw(const std::string& key);
  void RejectUnknown();

  std::string KeyPath(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& path() const { return path_; }
  Diagnostics* diag() const { return diag_; }
  const std::string& base_dir() const { return base_dir_; }
  void Error(const std::string& key, const std::string& problem) { diag_->Add(KeyPath(key), problem); }

 private:
  const nlohmann::json* Get(const std::string& key);
  const nlohmann::json* obj_;
  std::string path_;
  Diagnostics* diag_;
  std::string base_dir_;
  std::vector<std::string> used_;
  nlohmann::json empty_ = nlohmann::json::object();
};

// "abc" → "a string \"abc\"", 3 → "an integer 3", ...: how a found value is described.
std::string DescribeJson(const nlohmann::json& v);

}  // namespace slm::pipeline
