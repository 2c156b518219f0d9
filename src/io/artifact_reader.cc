#include "io/artifact_reader.h"

#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "artifact_generated.h"
#include "graph/memory_plan.h"

namespace slm::io {
namespace {

// Limits for the FlatBuffers verifier. The schema nests Program > Method > Value/Op, so 16
// levels is plenty; the table cap bounds verification time on a hostile buffer (a real program
// has a few tables per op and value: tens of thousands).
constexpr uint32_t kMaxVerifierDepth = 16;
constexpr uint32_t kMaxVerifierTables = 1u << 22;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
  return buf;
}

// Enum values from the file are checked through the name functions, which return "unknown"
// for any value they do not know; so appending an enum value needs no change here.
bool KnownDType(uint8_t d) { return std::strcmp(DTypeName(static_cast<DType>(d)), "unknown") != 0; }
bool KnownValueKind(uint8_t k) {
  return std::strcmp(graph::ValueKindName(static_cast<graph::ValueKind>(k)), "unknown") != 0;
}
bool KnownOpKind(uint16_t k) {
  return std::strcmp(graph::OpKindName(static_cast<graph::OpKind>(k)), "unknown") != 0;
}

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <typename T>
std::vector<T> Vec(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

// Every id in `ids` names a value of the method.
Status CheckIds(const std::vector<int32_t>& ids, size_t num_values, const std::string& where,
                const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= num_values) {
      return OutOfRange(where + ": " + field + "[" + std::to_string(i) + "] = " +
                        std::to_string(ids[i]) + " is not a value id (method has " +
                        std::to_string(num_values) + " values)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<ArtifactFile>> ArtifactFile::Open(const std::string& path) {
  std::shared_ptr<ArtifactFile> a(new ArtifactFile());
  a->path_ = path;
  SLM_ASSIGN_OR_RETURN(a->file_, MappedFile::Open(path));
  SLM_RETURN_IF_ERROR(a->CheckHeader());
  SLM_RETURN_IF_ERROR(a->CheckProgram());
  SLM_RETURN_IF_ERROR(a->ReadConstants());
  SLM_RETURN_IF_ERROR(a->CheckMethods());
  return a;
}

// Header checks, in the order that gives the most useful message for each defect: identity
// first, then version, then the program range (needed to compute the checksum), the checksum
// (so flipped size fields read as corruption), and last the data section against the file.
Status ArtifactFile::CheckHeader() {
  const uint64_t size = file_->size();
  const uint8_t* p = file_->data();
  if (size == 0) return ParseError(path_ + ": empty file (0 bytes), not a staticlm artifact");
  if (size < sizeof(kArtifactMagic) || std::memcmp(p, kArtifactMagic, sizeof(kArtifactMagic)) != 0) {
    return ParseError(path_ + ": not a staticlm artifact (the file does not start with \"STATICLM\")");
  }
  if (size < kArtifactHeaderBytes) {
    return ParseError(path_ + ": truncated header: file has " + std::to_string(size) +
                      " bytes, the header needs " + std::to_string(kArtifactHeaderBytes));
  }
  header_ = DecodeArtifactHeader(p);
  const ArtifactHeader& h = header_;
  if (h.format_version != kArtifactFormatVersion) {
    return Unsupported(path_ + ": unsupported format_version " + std::to_string(h.format_version) +
                       " (this reader supports " + std::to_string(kArtifactFormatVersion) + ")");
  }
  if (h.header_bytes != kArtifactHeaderBytes || h.program_offset != kArtifactHeaderBytes) {
    return ParseError(path_ + ": header_bytes " + std::to_string(h.header_bytes) +
                      " and program_offset " + std::to_string(h.program_offset) + ", expected " +
                      std::to_string(kArtifactHeaderBytes) + " for format_version 1");
  }
  uint64_t program_end = 0;
  if (__builtin_add_overflow(h.program_offset, h.program_size, &program_end) || program_end > size) {
    return ParseError(path_ + ": truncated or corrupt: program_size " + std::to_string(h.program_size) +
                      " reaches past the end of the file (" + std::to_string(size) + " bytes)");
  }
  const uint64_t checksum = ComputeArtifactChecksum(p, p + h.program_offset, h.program_size);
  if (checksum != h.checksum) {
    return ParseError(path_ + ": header or program corrupted: checksum " + Hex(checksum) +
                      " expected " + Hex(h.checksum));
  }
  for (size_t i = kArtifactChecksummedHeaderBytes + 8; i < kArtifactHeaderBytes; ++i) {
    if (p[i] != 0) return ParseError(path_ + ": reserved header byte " + std::to_string(i) + " is not zero");
  }
  if (h.data_offset % kArtifactDataAlignment != 0 || h.data_offset < program_end) {
    return ParseError(path_ + ": data_offset " + std::to_string(h.data_offset) +
                      " must be a multiple of " + std::to_string(kArtifactDataAlignment) +
                      " at or after the end of the program (" + std::to_string(program_end) + ")");
  }
  uint64_t data_end = 0;
  if (__builtin_add_overflow(h.data_offset, h.data_size, &data_end) || data_end > size) {
    return ParseError(path_ + ": truncated: the data section [" + std::to_string(h.data_offset) +
                      ", +" + std::to_string(h.data_size) + ") reaches past the end of the file (" +
                      std::to_string(size) + " bytes)");
  }
  if (data_end != size) {
    return ParseError(path_ + ": " + std::to_string(size - data_end) +
                      " unexpected bytes after the data section (ends at " +
                      std::to_string(data_end) + ")");
  }
  return Status::Ok();
}

Status ArtifactFile::CheckProgram() {
  const uint8_t* buf = file_->data() + header_.program_offset;
  const uint64_t n = header_.program_size;
  if (n < 8 || !fb::ProgramBufferHasIdentifier(buf)) {
    return ParseError(path_ + ": the program is not a staticlm Program FlatBuffer (identifier is not \"SLMP\")");
  }
  // The verifier asserts on buffers of 2 GiB or more; a writer never produces one.
  if (n >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return ParseError(path_ + ": program_size " + std::to_string(n) + " exceeds the 2 GiB limit");
  }
  flatbuffers::Verifier verifier(buf, static_cast<size_t>(n), kMaxVerifierDepth, kMaxVerifierTables);
  if (!fb::VerifyProgramBuffer(verifier)) {
    return ParseError(path_ + ": the program FlatBuffer failed verification (corrupt, or written "
                      "by an incompatible writer)");
  }
  program_ = fb::GetProgram(buf);
  producer_ = Str(program_->producer());
  metadata_json_ = Str(program_->metadata_json());
  tokenizer_kind_ = Str(program_->tokenizer_kind());
  if (const auto* t = program_->tokenizer()) {
    tokenizer_bytes_ = std::string_view(reinterpret_cast<const char*>(t->data()), t->size());
  }
  return Status::Ok();
}

Status ArtifactFile::ReadConstants() {
  const auto* table = program_->constants();
  const size_t n = table ? table->size() : 0;
  const uint8_t* data = file_->data() + header_.data_offset;
  std::unordered_set<std::string> names;
  constants_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const fb::Constant* c = table->Get(static_cast<flatbuffers::uoffset_t>(i));
    ConstantView view;
    view.name = Str(c->name());
    const std::string where = path_ + ": constant " + std::to_string(i) + " '" + view.name + "'";
    if (view.name.empty()) return ParseError(where + ": empty name");
    if (!names.insert(view.name).second) return ParseError(where + ": duplicate constant name");
    if (!KnownDType(c->dtype())) {
      return ParseError(where + ": unknown dtype " + std::to_string(c->dtype()));
    }
    view.dtype = static_cast<DType>(c->dtype());
    view.shape = Vec(c->shape());
    Result<uint64_t> expected = CheckedByteSize(view.dtype, view.shape);
    if (!expected.ok()) return OutOfRange(where + ": " + expected.status().message());
    if (c->nbytes() != *expected) {
      return ParseError(where + ": nbytes " + std::to_string(c->nbytes()) + " but " +
                        DTypeName(view.dtype) + " " + ShapeToString(view.shape) + " needs " +
                        std::to_string(*expected));
    }
    uint64_t end = 0;
    if (c->offset() % kArtifactConstantAlignment != 0) {
      return ParseError(where + ": offset " + std::to_string(c->offset()) +
                        " is not a multiple of " + std::to_string(kArtifactConstantAlignment));
    }
    if (__builtin_add_overflow(c->offset(), c->nbytes(), &end) || end > header_.data_size) {
      return OutOfRange(where + ": range [" + std::to_string(c->offset()) + ", +" +
                        std::to_string(c->nbytes()) + ") lies outside the data section (" +
                        std::to_string(header_.data_size) + " bytes)");
    }
    view.data = data + c->offset();
    view.nbytes = c->nbytes();
    view.xxh64 = c->xxh64();
    constants_.push_back(std::move(view));
  }
  return Status::Ok();
}

Status ArtifactFile::CheckMethods() const {
  const auto* methods = program_->methods();
  if (!methods || methods->size() == 0) return ParseError(path_ + ": the program has no methods");
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < methods->size(); ++i) {
    SLM_ASSIGN_OR_RETURN(graph::Graph g, DecodeMethod(i));
    if (!names.insert(g.name).second) {
      return ParseError(path_ + ": duplicate method name '" + g.name + "'");
    }
    SLM_RETURN_IF_ERROR(WithContext(path_, g.Validate()));
  }
  return Status::Ok();
}

// Rebuilds one method, checking every field that graph::Graph::Validate and
// graph::CheckMemoryPlan take for granted (enums, ids, sizes, constant references).
Result<graph::Graph> ArtifactFile::DecodeMethod(size_t index) const {
  const fb::Method* m = program_->methods()->Get(static_cast<flatbuffers::uoffset_t>(index));
  graph::Graph g;
  g.name = Str(m->name());
  if (g.name.empty()) return ParseError(path_ + ": method " + std::to_string(index) + " has no name");
  const std::string where = path_ + ": method '" + g.name + "'";

  const size_t num_values = m->values() ? m->values()->size() : 0;
  g.values.reserve(num_values);
  for (size_t j = 0; j < num_values; ++j) {
    const fb::Value* fv = m->values()->Get(static_cast<flatbuffers::uoffset_t>(j));
    graph::Value v;
    v.name = Str(fv->name());
    std::string vwhere = where + " value " + std::to_string(j) + " '" + v.name + "'";
    if (!KnownValueKind(fv->kind())) return ParseError(vwhere + ": unknown kind " + std::to_string(fv->kind()));
    v.kind = static_cast<graph::ValueKind>(fv->kind());
    vwhere += std::string(" (") + graph::ValueKindName(v.kind) + ")";
    if (!KnownDType(fv->dtype())) return ParseError(vwhere + ": unknown dtype " + std::to_string(fv->dtype()));
    v.dtype = static_cast<DType>(fv->dtype());
    v.shape = Vec(fv->shape());
    Result<uint64_t> bytes = CheckedByteSize(v.dtype, v.shape);
    if (!bytes.ok()) return OutOfRange(vwhere + ": " + bytes.status().message());

    const int32_t ci = fv->constant();
    if (v.kind == graph::ValueKind::kConstant) {
      if (ci < 0 || static_cast<size_t>(ci) >= constants_.size()) {
        return OutOfRange(vwhere + ": constant index " + std::to_string(ci) + " out of range [0, " +
                          std::to_string(constants_.size()) + ")");
      }
      const ConstantView& c = constants_[ci];
      if (c.dtype != v.dtype || c.shape != v.shape) {
        return ParseError(vwhere + ": is " + DTypeName(v.dtype) + " " + ShapeToString(v.shape) +
                          " but its constant '" + c.name + "' is " + DTypeName(c.dtype) + " " +
                          ShapeToString(c.shape));
      }
      v.constant_index = ci;
    } else if (ci != -1) {
      return ParseError(vwhere + ": has constant index " + std::to_string(ci) + " but is not a constant");
    }
    if (v.kind == graph::ValueKind::kIntermediate) {
      v.arena_offset = fv->arena_offset();  // range checked by CheckMemoryPlan below
    } else if (fv->arena_offset() != -1) {
      return ParseError(vwhere + ": has arena offset " + std::to_string(fv->arena_offset()) +
                        " but is not an intermediate");
    }
    g.values.push_back(std::move(v));
  }

  const size_t num_ops = m->ops() ? m->ops()->size() : 0;
  g.ops.reserve(num_ops);
  for (size_t k = 0; k < num_ops; ++k) {
    const fb::Op* fop = m->ops()->Get(static_cast<flatbuffers::uoffset_t>(k));
    const std::string owhere = where + " op " + std::to_string(k);
    if (!KnownOpKind(fop->kind())) return ParseError(owhere + ": unknown op kind " + std::to_string(fop->kind()));
    graph::Op op;
    op.kind = static_cast<graph::OpKind>(fop->kind());
    op.inputs = Vec(fop->inputs());
    op.outputs = Vec(fop->outputs());
    SLM_RETURN_IF_ERROR(CheckIds(op.inputs, num_values, owhere, "inputs"));
    SLM_RETURN_IF_ERROR(CheckIds(op.outputs, num_values, owhere, "outputs"));
    op.ints = Vec(fop->ints());
    op.floats = Vec(fop->floats());
    op.debug = Str(fop->debug());
    g.ops.push_back(std::move(op));
  }

  g.inputs = Vec(m->inputs());
  g.outputs = Vec(m->outputs());
  SLM_RETURN_IF_ERROR(CheckIds(g.inputs, num_values, where, "inputs"));
  SLM_RETURN_IF_ERROR(CheckIds(g.outputs, num_values, where, "outputs"));
  g.arena_bytes = m->arena_bytes();
  SLM_RETURN_IF_ERROR(WithContext(path_, graph::CheckMemoryPlan(g)));
  return g;
}

std::vector<std::string> ArtifactFile::method_names() const {
  std::vector<std::string> names;
  for (const fb::Method* m : *program_->methods()) names.push_back(Str(m->name()));
  return names;
}

Result<graph::Graph> ArtifactFile::LoadMethod(const std::string& name) const {
  const auto* methods = program_->methods();
  for (size_t i = 0; i < methods->size(); ++i) {
    if (Str(methods->Get(static_cast<flatbuffers::uoffset_t>(i))->name()) != name) continue;
    SLM_ASSIGN_OR_RETURN(graph::Graph g, DecodeMethod(i));
    SLM_RETURN_IF_ERROR(WithContext(path_, g.Validate()));
    return g;
  }
  std::string present;
  for (const std::string& n : method_names()) present += (present.empty() ? "" : ", ") + n;
  return NotFound(path_ + ": no method '" + name + "' (methods: " + present + ")");
}

Status ArtifactFile::VerifyConstantHashes() const {
  for (size_t i = 0; i < constants_.size(); ++i) {
    const ConstantView& c = constants_[i];
    const uint64_t hash = XXH64(c.data, c.nbytes, 0);
    if (hash != c.xxh64) {
      return ParseError(path_ + ": constant " + std::to_string(i) + " '" + c.name +
                        "': data corrupted: xxh64 " + Hex(hash) + " expected " + Hex(c.xxh64));
    }
  }
  return Status::Ok();
}

}  // namespace slm::io
