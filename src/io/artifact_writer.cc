#include "io/artifact_writer.h"

#include <xxhash.h>

#include <cstring>
#include <memory>
#include <unordered_set>

#include "artifact_generated.h"
#include "core/atomic_file.h"
#include "graph/constant_lifting.h"
#include "graph/memory_plan.h"

namespace slm::io {
namespace {

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

uint64_t AlignUp(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

// ---- Program serialization ----

// An upper bound of the serialized size, so an oversized program is an error instead of a
// FlatBuffers assertion. Each table or vector is charged generously for headers and padding.
uint64_t EstimateProgramBytes(const ProgramParts& parts) {
  constexpr uint64_t kPerObject = 64;
  uint64_t total = 1024 + parts.producer.size() + parts.metadata_json.size() +
                   parts.tokenizer_kind.size() + parts.tokenizer_bytes.size();
  for (const ConstantRecord& c : parts.constants) {
    total += kPerObject * 3 + c.name.size() + 8 * c.shape.size();
  }
  for (const graph::Graph* g : parts.methods) {
    total += kPerObject * 4 + g->name.size() + 4 * (g->inputs.size() + g->outputs.size());
    for (const graph::Value& v : g->values) total += kPerObject * 3 + v.name.size() + 8 * v.shape.size();
    for (const graph::Op& op : g->ops) {
      total += kPerObject * 6 + op.debug.size() + 4 * (op.inputs.size() + op.outputs.size()) +
               8 * op.ints.size() + 4 * op.floats.size();
    }
  }
  return total;
}

flatbuffers::Offset<fb::Method> SerializeMethod(flatbuffers::FlatBufferBuilder& b,
                                                const graph::Graph& g) {
  std::vector<flatbuffers::Offset<fb::Value>> values;
  values.reserve(g.values.size());
  for (const graph::Value& v : g.values) {
    values.push_back(fb::CreateValue(b, b.CreateString(v.name), static_cast<uint8_t>(v.dtype),
                                     b.CreateVector(v.shape), static_cast<uint8_t>(v.kind),
                                     v.constant_index, v.arena_offset));
  }
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  ops.reserve(g.ops.size());
  for (const graph::Op& op : g.ops) {
    ops.push_back(fb::CreateOp(b, static_cast<uint16_t>(op.kind), b.CreateVector(op.inputs),
                               b.CreateVector(op.outputs), b.CreateVector(op.ints),
                               b.CreateVector(op.floats), b.CreateString(op.debug)));
  }
  return fb::CreateMethod(b, b.CreateString(g.name), b.CreateVector(values), b.CreateVector(ops),
                          b.CreateVector(g.inputs), b.CreateVector(g.outputs), g.arena_bytes);
}

flatbuffers::Offset<fb::Constant> SerializeConstant(flatbuffers::FlatBufferBuilder& b,
                                                    const ConstantRecord& c) {
  return fb::CreateConstant(b, b.CreateString(c.name), static_cast<uint8_t>(c.dtype),
                            b.CreateVector(c.shape), c.offset, c.nbytes, c.xxh64);
}

// ---- WriteArtifact steps ----

Status CheckContents(const std::string& path, const ArtifactContents& c) {
  if (c.methods == nullptr || c.methods->empty()) {
    return InvalidArgument(path + ": an artifact needs at least one method");
  }
  std::unordered_set<std::string> names;
  for (const graph::Graph& g : *c.methods) {
    if (g.name.empty()) return InvalidArgument(path + ": a method has an empty name");
    if (!names.insert(g.name).second) {
      return InvalidArgument(path + ": duplicate method name '" + g.name + "'");
    }
  }
  return Status::Ok();
}

// Plans methods that are not planned yet, then checks every plan and graph, so the writer
// never produces a file that the reader would reject.
Status PrepareMethods(const std::string& path, std::vector<graph::Graph>& methods) {
  for (graph::Graph& g : methods) {
    bool planned = true;
    for (const graph::Value& v : g.values) {
      if (v.kind == graph::ValueKind::kIntermediate && v.arena_offset < 0) planned = false;
    }
    if (!planned) SLM_RETURN_IF_ERROR(WithContext(path, graph::PlanMemory(g)));
    SLM_RETURN_IF_ERROR(WithContext(path, graph::CheckMemoryPlan(g)));
    SLM_RETURN_IF_ERROR(WithContext(path, g.Validate()));
  }
  return Status::Ok();
}

// Places the constants back to back at 64-aligned offsets; returns the data section size.
uint64_t LayOutConstants(const std::vector<graph::LiftedConstant>& lifted,
                         std::vector<ConstantRecord>* records) {
  uint64_t end = 0;
  for (const graph::LiftedConstant& c : lifted) {
    const uint64_t offset = AlignUp(end, kArtifactConstantAlignment);
    records->push_back(ConstantRecord{c.name, c.dtype, c.shape, offset, c.nbytes, c.xxh64});
    end = offset + c.nbytes;
  }
  return end;
}

// Streams one constant: read into a scratch buffer, check it still hashes as when it was
// lifted (a source must be deterministic, or the table would lie), write, release.
Status WriteConstant(const std::string& path, const graph::LiftedConstant& c,
                     AtomicFileWriter& out) {
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(c.nbytes);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(path + ": cannot allocate " + std::to_string(c.nbytes) +
                             " bytes for constant '" + c.name + "'");
  }
  Status s = c.source->Read(bytes.data(), c.nbytes);
  if (!s.ok()) return Status(s.code(), path + ": constant '" + c.name + "': " + s.message());
  const uint64_t hash = XXH64(bytes.data(), bytes.size(), 0);
  if (hash != c.xxh64) {
    return Internal(path + ": constant '" + c.name + "' (" + c.source->Describe() +
                    ") returned different bytes when re-read for writing");
  }
  return out.Write(bytes.data(), bytes.size());
}

}  // namespace

std::array<uint8_t, kArtifactHeaderBytes> EncodeArtifactHeader(const ArtifactHeader& h,
                                                               std::string_view program) {
  std::array<uint8_t, kArtifactHeaderBytes> out{};
  std::memcpy(out.data(), kArtifactMagic, sizeof(kArtifactMagic));
  PutU32(out.data() + 8, h.format_version);
  PutU32(out.data() + 12, h.header_bytes);
  PutU64(out.data() + 16, h.program_offset);
  PutU64(out.data() + 24, h.program_size);
  PutU64(out.data() + 32, h.data_offset);
  PutU64(out.data() + 40, h.data_size);
  PutU64(out.data() + 48, ComputeArtifactChecksum(
                              out.data(), reinterpret_cast<const uint8_t*>(program.data()),
                              program.size()));
  return out;
}

ArtifactHeader DecodeArtifactHeader(const uint8_t* p) {
  ArtifactHeader h;
  h.format_version = GetU32(p + 8);
  h.header_bytes = GetU32(p + 12);
  h.program_offset = GetU64(p + 16);
  h.program_size = GetU64(p + 24);
  h.data_offset = GetU64(p + 32);
  h.data_size = GetU64(p + 40);
  h.checksum = GetU64(p + 48);
  return h;
}

uint64_t ComputeArtifactChecksum(const uint8_t* header, const uint8_t* program,
                                 size_t program_size) {
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  XXH64_update(state.get(), header, kArtifactChecksummedHeaderBytes);
  if (program_size) XXH64_update(state.get(), program, program_size);
  return XXH64_digest(state.get());
}

Result<std::string> SerializeProgram(const ProgramParts& parts) {
  const uint64_t estimate = EstimateProgramBytes(parts);
  if (estimate >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return ResourceExhausted("program would take about " + std::to_string(estimate) +
                             " bytes, over the FlatBuffers limit of 2 GiB");
  }
  // Children first (FlatBuffers builds bottom-up); the order is fixed, so the bytes are
  // deterministic.
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  constants.reserve(parts.constants.size());
  for (const ConstantRecord& c : parts.constants) constants.push_back(SerializeConstant(b, c));
  std::vector<flatbuffers::Offset<fb::Method>> methods;
  methods.reserve(parts.methods.size());
  for (const graph::Graph* g : parts.methods) methods.push_back(SerializeMethod(b, *g));

  auto producer = b.CreateString(parts.producer);
  auto metadata = b.CreateString(parts.metadata_json.data(), parts.metadata_json.size());
  auto constants_vec = b.CreateVector(constants);
  auto methods_vec = b.CreateVector(methods);
  auto tokenizer_kind = b.CreateString(parts.tokenizer_kind.data(), parts.tokenizer_kind.size());
  auto tokenizer = b.CreateVector(reinterpret_cast<const uint8_t*>(parts.tokenizer_bytes.data()),
                                  parts.tokenizer_bytes.size());
  fb::FinishProgramBuffer(b, fb::CreateProgram(b, producer, metadata, constants_vec, methods_vec,
                                               tokenizer_kind, tokenizer));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Status WriteArtifact(const std::string& path, ArtifactContents contents) {
  SLM_RETURN_IF_ERROR(CheckContents(path, contents));
  std::vector<graph::Graph>& methods = *contents.methods;

  std::vector<graph::Graph*> method_ptrs;
  for (graph::Graph& g : methods) method_ptrs.push_back(&g);
  Result<std::vector<graph::LiftedConstant>> lifted = graph::LiftConstants(method_ptrs);
  if (!lifted.ok()) return WithContext(path, lifted.status());
  SLM_RETURN_IF_ERROR(PrepareMethods(path, methods));

  ProgramParts parts;
  parts.metadata_json = contents.metadata_json;
  parts.tokenizer_kind = contents.tokenizer_kind;
  parts.tokenizer_bytes = contents.tokenizer_bytes;
  for (const graph::Graph& g : methods) parts.methods.push_back(&g);
  const uint64_t data_size = LayOutConstants(*lifted, &parts.constants);
  Result<std::string> program = SerializeProgram(parts);
  if (!program.ok()) return WithContext(path, program.status());

  ArtifactHeader header;
  header.program_size = program->size();
  header.data_offset = AlignUp(kArtifactHeaderBytes + program->size(), kArtifactDataAlignment);
  header.data_size = data_size;
  const auto header_bytes = EncodeArtifactHeader(header, *program);

  SLM_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::Create(path));
  SLM_RETURN_IF_ERROR(out.Write(header_bytes.data(), header_bytes.size()));
  SLM_RETURN_IF_ERROR(out.Write(program->data(), program->size()));
  SLM_RETURN_IF_ERROR(out.WriteZeros(header.data_offset - out.bytes_written()));
  for (size_t i = 0; i < lifted->size(); ++i) {
    const uint64_t at = header.data_offset + parts.constants[i].offset;
    SLM_RETURN_IF_ERROR(out.WriteZeros(at - out.bytes_written()));
    SLM_RETURN_IF_ERROR(WriteConstant(path, (*lifted)[i], out));
  }
  return out.Commit();
}

}  // namespace slm::io
