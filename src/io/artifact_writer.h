// The staticlm artifact: one file holding every method of a program, the constant table and
// the weights (stored once, page-aligned for zero-copy mmap), and the hf_static metadata.
// Layout (see docs/artifact-format.md):
//
//   [0, 64)                         header, little-endian (ArtifactHeader)
//   [64, 64 + program_size)         Program FlatBuffer (src/io/artifact.fbs, identifier "SLMP")
//   zero padding up to data_offset  (a multiple of 4096)
//   [data_offset, + data_size)      data section: each constant at a 64-aligned offset
//
// This header also defines the format constants and the header codec that the reader uses.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/graph.h"

namespace slm::io {

inline constexpr char kArtifactMagic[8] = {'S', 'T', 'A', 'T', 'I', 'C', 'L', 'M'};
inline constexpr uint32_t kArtifactFormatVersion = 1;
inline constexpr uint32_t kArtifactHeaderBytes = 64;
// Bytes [0, kArtifactChecksummedHeaderBytes) of the header are covered by the checksum; the
// checksum itself sits right after them, then reserved zero bytes.
inline constexpr size_t kArtifactChecksummedHeaderBytes = 48;
inline constexpr uint64_t kArtifactDataAlignment = 4096;    // data_offset: page aligned
inline constexpr uint64_t kArtifactConstantAlignment = 64;  // every constant's offset
inline constexpr const char* kArtifactProducer = "staticlm 0.1.0";

// The fixed header (all integers little-endian):
//   0  magic "STATICLM"     8  u32 format_version   12 u32 header_bytes
//   16 u64 program_offset   24 u64 program_size     32 u64 data_offset
//   40 u64 data_size        48 u64 checksum         56 8 reserved bytes, zero
struct ArtifactHeader {
  uint32_t format_version = kArtifactFormatVersion;
  uint32_t header_bytes = kArtifactHeaderBytes;
  uint64_t program_offset = kArtifactHeaderBytes;
  uint64_t program_size = 0;
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
  // XXH64 (seed 0) of header bytes [0, 48) followed by the program bytes: catches flipped
  // bytes in the header and the program. The weights have their own per-constant hashes.
  uint64_t checksum = 0;
};

// Encodes `h` with its magic; the checksum is computed from the encoded fields and `program`
// (h.checksum is ignored).
std::array<uint8_t, kArtifactHeaderBytes> EncodeArtifactHeader(const ArtifactHeader& h,
                                                               std::string_view program);
// Decodes the fields of a 64-byte header (magic and reserved bytes are not checked here).
ArtifactHeader DecodeArtifactHeader(const uint8_t* header);
// The checksum defined above, over an encoded header and the program bytes.
uint64_t ComputeArtifactChecksum(const uint8_t* header, const uint8_t* program,
                                 size_t program_size);

// What WriteArtifact puts in the file.
struct ArtifactContents {
  // The methods, in the order they are stored. The writer lifts their constants (sets
  // Value::constant_index) and plans the memory of any method that has an unplanned
  // intermediate (arena_offset < 0); a method that is already planned keeps its plan, which
  // must pass graph::CheckMemoryPlan. Every kConstant value needs a ConstantSource.
  std::vector<graph::Graph>* methods = nullptr;
  std::string metadata_json;    // hf_static contract metadata (not parsed here)
  std::string tokenizer_kind;   // "sentencepiece" or "" (none); not interpreted here
  std::string tokenizer_bytes;  // the embedded tokenizer file
};

// Writes the artifact to `path` atomically (temp file + fsync + rename): on any error, or a
// crash, nothing is left under `path` (an existing file there is untouched) and the temp file
// is removed. Weights are streamed one constant at a time: each source is read, its hash
// checked against the one computed while lifting (a source that changes between the two reads
// is an error), written and released. The output is deterministic: the same contents give a
// byte-identical file. Size: header + program + padding to 4096 + unique constant bytes + at
// most 63 bytes of padding per constant.
Status WriteArtifact(const std::string& path, ArtifactContents contents);

// ---- Lower-level pieces (used by WriteArtifact; exposed for tools and for tests that craft
// hostile files with valid checksums). ----

// One entry of the serialized constant table; `offset` is relative to data_offset.
struct ConstantRecord {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t xxh64 = 0;
};

struct ProgramParts {
  std::string producer = kArtifactProducer;
  std::string_view metadata_json;
  std::string_view tokenizer_kind;
  std::string_view tokenizer_bytes;
  std::vector<ConstantRecord> constants;
  // Serialized as they are: values with their constant_index and arena_offset, no sources.
  std::vector<const graph::Graph*> methods;
};

// Builds the Program FlatBuffer (finished with identifier "SLMP"). No semantic checks: the
// caller decides what goes in (tests use this to write lying tables). Fails only when the
// program would exceed FlatBuffers' 2 GiB limit.
Result<std::string> SerializeProgram(const ProgramParts& parts);

}  // namespace slm::io
