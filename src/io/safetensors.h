// Reader of Hugging Face safetensors checkpoints: single files and sharded directories.
//
// Files are memory-mapped and tensors are used in place: opening a checkpoint parses the JSON
// headers only, and no weight byte is copied until a caller converts a tensor. Every header
// field is untrusted and checked when the file is opened: sizes, dtypes, offsets (inside the
// data section, consistent with dtype × shape, not overlapping), so a TensorInfo that comes out
// of a checkpoint can be read without further checks.
//
// Format (https://github.com/huggingface/safetensors): u64 little-endian N, N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>"}}
// then the data section; offsets are relative to its start.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"
#include "graph/graph.h"

namespace slm::io {

struct TensorInfo {
  std::string name;
  // F32, F16 or BF16 for weights; I32, I64, I8 and U8 are accepted too (they occur as buffers
  // and in pre-quantized checkpoints), but ReadAsF32 rejects them.
  DType dtype = DType::kF32;
  Shape shape;
  // Points into the mapping; may be unaligned (the format does not align tensors). Exactly
  // nbytes == CheckedByteSize(dtype, shape) bytes.
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  std::string file;  // path of the file (shard) holding the tensor
  // Keeps `data` valid for as long as this TensorInfo (or a copy) lives.
  std::shared_ptr<const MappedFile> mapping;
};

// File names Hugging Face uses in a checkpoint directory.
inline constexpr char kSafetensorsFileName[] = "model.safetensors";
inline constexpr char kSafetensorsIndexName[] = "model.safetensors.index.json";

class SafetensorsCheckpoint {
 public:
  // `dir` holds model.safetensors or, for sharded checkpoints, model.safetensors.index.json
  // ({"weight_map": {tensor: shard file}}); the single file wins when both exist, as in
  // transformers. Errors: NotFound naming the directory when it or both files are missing, or
  // naming the shard and the index when a shard is missing or lacks a tensor the index puts
  // there; ParseError / OutOfRange / Unsupported for bad file content (see OpenFile).
  static Result<SafetensorsCheckpoint> OpenDir(const std::string& dir);
  // One safetensors file. Errors name the file, the tensor, what was found and what was
  // expected: ParseError (too short, bad JSON, missing or ill-typed fields, duplicate names,
  // size ≠ dtype × shape, overlapping tensors), OutOfRange (header length or data_offsets
  // beyond the file), Unsupported (a dtype other than those listed in TensorInfo).
  static Result<SafetensorsCheckpoint> OpenFile(const std::string& path);

  // nullptr when the checkpoint has no tensor of that name.
  const TensorInfo* Find(const std::string& name) const;
  std::vector<std::string> Names() const;  // sorted
  size_t size() const { return tensors_.size(); }
  // The files that were opened (one, or every shard in sorted order).
  const std::vector<std::string>& files() const { return files_; }

  // Converts `t` to float32 into dst[numel]. F32 is copied, F16 and BF16 are widened exactly.
  // Unsupported for integer dtypes; InvalidArgument when t.nbytes does not match its shape.
  static Status ReadAsF32(const TensorInfo& t, float* dst);

 private:
  Status AddFile(const std::string& path);

  std::map<std::string, TensorInfo> tensors_;
  std::vector<std::string> files_;
};

// A graph constant whose bytes are `t` converted to float32 when the artifact writer asks for
// them (the checkpoint stays mapped through `t.mapping`). The value must be F32 of t's shape.
std::shared_ptr<const graph::ConstantSource> MakeF32ConstantSource(TensorInfo t);

}  // namespace slm::io
