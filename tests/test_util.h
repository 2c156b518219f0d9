// Helpers shared by the test suites: paths to the shared assets, temp dirs, compiled artifacts
// (compiled once per process and reused), golden files, and running the CLI.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slm::testing {

inline std::string SharedDir() { return SLM_SHARED_DIR; }
inline std::string SourceDir() { return SLM_SOURCE_DIR; }
inline std::string CliPath() { return SLM_CLI_PATH; }
// The shared tokenizer files (<name>/tokenizer.json, ggml-vocab-*.gguf, ...), with a trailing "/".
inline std::string TokenizersDir() { return SharedDir() + "/tokenizers/"; }

inline std::vector<std::string>& TempDirs() {
  static auto* dirs = [] {
    auto* v = new std::vector<std::string>();
    std::atexit([] {
      std::error_code ec;
      for (const auto& d : TempDirs()) std::filesystem::remove_all(d, ec);
    });
    return v;
  }();
  return *dirs;
}

// A fresh directory under the system temp dir, removed at process exit.
inline std::string MakeTempDir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("slm-" + tag + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  TempDirs().push_back(tmpl);
  return tmpl;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

inline nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(ReadFile(path)); }

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `staticlm <args>` through the shell; stdout and stderr captured separately.
inline CommandResult RunCli(const std::string& args) {
  std::string dir = MakeTempDir("cli");
  std::string cmd = CliPath() + " " + args + " >" + dir + "/out 2>" + dir + "/err";
  int rc = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  r.out = ReadFile(dir + "/out");
  r.err = ReadFile(dir + "/err");
  return r;
}

// A refused command: non-zero exit without a crash, and exactly one stderr line,
// "staticlm: error: ...", that contains `needle`.
inline void ExpectOneLineError(const CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "expected exactly one line, got:\n" << r.err;
  EXPECT_EQ(r.err.rfind("staticlm: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

}  // namespace slm::testing
