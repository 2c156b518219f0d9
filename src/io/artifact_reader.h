// Reading a staticlm artifact (format: artifact_writer.h, docs/artifact-format.md).
// The file is mapped, never copied: constant data pointers point into the mapping and stay
// valid as long as the ArtifactFile lives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"
#include "graph/graph.h"
#include "io/artifact_writer.h"

namespace slm::fb {
struct Program;
}

namespace slm::io {

class ArtifactFile {
 public:
  // Maps `path` and verifies everything except the weights' content hashes: header (magic,
  // version, sizes, offsets against the file size with overflow-checked arithmetic), the
  // checksum of header and program, the FlatBuffer structure, the constant table (ranges,
  // alignment, dtypes, sizes) and every method (enums, shapes, ids, constant references, arena
  // plan, graph::Graph::Validate). The file is treated as hostile: any defect is an error
  // naming the file and the field, never a crash or an out-of-bounds read.
  static Result<std::shared_ptr<ArtifactFile>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t format_version() const { return header_.format_version; }
  const std::string& metadata_json() const { return metadata_json_; }
  const std::string& producer() const { return producer_; }
  const std::string& tokenizer_kind() const { return tokenizer_kind_; }
  std::string_view tokenizer_bytes() const { return tokenizer_bytes_; }
  uint64_t file_size() const { return file_->size(); }
  const uint8_t* file_data() const { return file_->data(); }  // the whole file, mapped or read

  struct ConstantView {
    std::string name;
    DType dtype;
    Shape shape;
    const uint8_t* data;  // inside the mapping, 64-byte aligned
    uint64_t nbytes;
    uint64_t xxh64;
  };
  const std::vector<ConstantView>& constants() const { return constants_; }

  std::vector<std::string> method_names() const;
  // Deserializes one method: values carry constant_index / arena_offset, no sources.
  // NotFound (listing the methods present) when there is no method `name`.
  Result<graph::Graph> LoadMethod(const std::string& name) const;

  // Hashes every constant and compares with the table (reads all weights: slow for big files).
  Status VerifyConstantHashes() const;

 private:
  ArtifactFile() = default;
  Status CheckHeader();
  Status CheckProgram();
  Status ReadConstants();
  Status CheckMethods() const;
  Result<graph::Graph> DecodeMethod(size_t index) const;

  std::string path_;
  std::shared_ptr<MappedFile> file_;
  ArtifactHeader header_;
  const fb::Program* program_ = nullptr;  // inside the mapping, verified
  std::string metadata_json_, producer_, tokenizer_kind_;
  std::string_view tokenizer_bytes_;
  std::vector<ConstantView> constants_;
};

}  // namespace slm::io
