// Editable copies of zoo checkpoints for the model tests: copy a family's files into a fresh
// temp dir, then rewrite config.json / tokenizer_config.json / generation_config.json.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace slm::testing {

inline std::string CopyZooCheckpoint(const std::string& family, const std::string& tag) {
  namespace fs = std::filesystem;
  const std::string dir = MakeTempDir(tag);
  for (const fs::directory_entry& e : fs::directory_iterator(SharedDir() + "/models/zoo/" + family)) {
    fs::copy_file(e.path(), fs::path(dir) / e.path().filename(), fs::copy_options::overwrite_existing);
  }
  return dir;
}

// Rewrites <dir>/<file> (a JSON object; {} when the file is missing) with `edit`.
inline void EditJsonFile(const std::string& dir, const std::string& file,
                         const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/" + file;
  nlohmann::json j = std::filesystem::exists(path) ? ReadJson(path) : nlohmann::json::object();
  edit(j);
  WriteFile(path, j.dump(2));
}

}  // namespace slm::testing
