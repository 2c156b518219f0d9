// Helpers for the session tests: a test-only hook that rewrites an artifact with altered
// metadata (and optionally altered method graphs), with valid checksums, so each load-time rule
// can be tested against a file that breaks exactly that rule.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/artifacts.h"
#include "io/artifact_reader.h"
#include "io/artifact_writer.h"
#include "llm/session.h"
#include "runtime/program.h"

namespace slm::testing {

// A constant read back from a mapped artifact.
class MappedConstant final : public graph::ConstantSource {
 public:
  MappedConstant(std::shared_ptr<const io::ArtifactFile> file, size_t index) : file_(std::move(file)), index_(index) {}
  Status Read(uint8_t* dst, uint64_t nbytes) const override {
    const auto& c = file_->constants()[index_];
    if (nbytes != c.nbytes) return InvalidArgument("size mismatch");
    std::memcpy(dst, c.data, nbytes);
    return Status::Ok();
  }
  std::string Describe() const override { return file_->path() + " constant " + std::to_string(index_); }

 private:
  std::shared_ptr<const io::ArtifactFile> file_;
  size_t index_;
};

// Reads `in`, applies the edits, writes `out` through WriteArtifact (checksums valid).
inline Status RewriteArtifact(const std::string& in, const std::string& out,
                              const std::function<void(nlohmann::json&)>& edit_metadata,
                              const std::function<void(std::vector<graph::Graph>&)>& edit_graphs = {}) {
  SLM_ASSIGN_OR_RETURN(auto file, io::ArtifactFile::Open(in));
  std::shared_ptr<const io::ArtifactFile> f = file;
  std::vector<graph::Graph> graphs;
  for (const std::string& name : f->method_names()) {
    SLM_ASSIGN_OR_RETURN(graph::Graph g, f->LoadMethod(name));
    for (graph::Value& v : g.values) {
      if (v.kind == graph::ValueKind::kConstant) {
        v.source = std::make_shared<MappedConstant>(f, static_cast<size_t>(v.constant_index));
        v.constant_index = -1;
      }
    }
    graphs.push_back(std::move(g));
  }
  if (edit_graphs) edit_graphs(graphs);
  nlohmann::json meta = nlohmann::json::parse(f->metadata_json());
  if (edit_metadata) edit_metadata(meta);
  io::ArtifactContents c;
  c.methods = &graphs;
  c.metadata_json = meta.dump();
  c.tokenizer_kind = f->tokenizer_kind();
  c.tokenizer_bytes = std::string(f->tokenizer_bytes());
  return io::WriteArtifact(out, std::move(c));
}

// Loads `path` and creates a session (status only).
inline Result<std::unique_ptr<llm::Session>> OpenSession(const std::string& path, llm::SessionOptions o = {}) {
  SLM_ASSIGN_OR_RETURN(auto program, runtime::Program::Load(path));
  return llm::Session::Create(std::move(program), o);
}

// stories260K with prefill steps 4 and 16 and a 64-token context: small and fast.
inline std::string SmallArtifact() {
  return CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 64);
}

// Same size and the same bits (NaNs and signed zeros included).
inline bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline std::vector<int32_t> TestTokens(int64_t n, int64_t vocab, uint32_t seed = 7) {
  std::vector<int32_t> ids = {1};
  uint32_t x = seed;
  while (static_cast<int64_t>(ids.size()) < n) {
    x = x * 1664525u + 1013904223u;
    ids.push_back(3 + static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab - 3)));
  }
  return ids;
}

}  // namespace slm::testing
