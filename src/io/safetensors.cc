#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <unordered_set>
#include <utility>

#include "core/fp16.h"
#include "io/json_util.h"

namespace slm::io {

using nlohmann::json;
namespace fs = std::filesystem;

// The format and the conversions below read little-endian bytes in place.
static_assert(std::endian::native == std::endian::little, "safetensors reader assumes little-endian");

namespace {

// The safetensors reference implementation refuses larger headers; so do we, before parsing.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  const char* name;  // safetensors spelling
  DType dtype;
};
constexpr DTypeEntry kDTypes[] = {
    {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}, {"I32", DType::kI32},
    {"I64", DType::kI64}, {"I8", DType::kI8},   {"U8", DType::kU8},
};

std::string SupportedDTypeList() {
  std::string s;
  for (const DTypeEntry& e : kDTypes) s += std::string(s.empty() ? "" : ", ") + e.name;
  return s;
}

const char* SafetensorsDTypeName(DType t) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == t) return e.name;
  }
  return DTypeName(t);
}

std::string TensorWhere(const std::string& path, const std::string& name) {
  return path + ": tensor '" + name + "'";
}

// Prefixes a status from a shared helper (CheckedByteSize, ...) with the tensor it is about.
Status WithContext(const Status& s, const std::string& where) {
  return Status(s.code(), where + ": " + s.message());
}

std::string OffsetsString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Parses the header JSON. nlohmann keeps the last of duplicate keys silently; two entries for
// one tensor name make the file ambiguous, so a parser callback looks for them.
Result<json> ParseHeader(std::string_view text, const std::string& path) {
  std::unordered_set<std::string> names;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !names.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), on_event);
  } catch (const std::exception& e) {
    return ParseError(path + ": header is not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) {
    return ParseError(path + ": header lists tensor '" + duplicate + "' more than once");
  }
  if (!header.is_object()) {
    return ParseError(path + ": header is " + DescribeJson(header) +
                      ", expected a JSON object of tensor entries");
  }
  return header;
}

Status CheckMetadata(const json& metadata, const std::string& path) {
  const std::string where = path + ": field '__metadata__'";
  if (!metadata.is_object()) {
    return ParseError(where + " is " + DescribeJson(metadata) + ", expected an object of strings");
  }
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      return ParseError(where + " entry '" + key + "' is " + DescribeJson(value) +
                        ", expected a string");
    }
  }
  return Status::Ok();
}

Result<DType> ParseDType(const JsonObject& entry) {
  SLM_ASSIGN_OR_RETURN(std::string name, entry.String("dtype"));
  for (const DTypeEntry& e : kDTypes) {
    if (name == e.name) return e.dtype;
  }
  return Unsupported(entry.source() + ": dtype '" + name + "' is not supported; supported: " +
                     SupportedDTypeList());
}

Result<Shape> ParseShape(const JsonObject& entry) {
  const json* v = entry.Get("shape");
  if (!v) return ParseError(entry.Where("shape") + " is missing");
  if (!v->is_array()) {
    return ParseError(entry.Where("shape") + " is " + DescribeJson(*v) +
                      ", expected an array of non-negative integers");
  }
  Shape shape;
  for (size_t i = 0; i < v->size(); ++i) {
    SLM_ASSIGN_OR_RETURN(
        int64_t d, JsonToInt64((*v)[i], entry.Where("shape") + " element " + std::to_string(i),
                               ErrorCode::kParseError));
    if (d < 0) {
      return ParseError(entry.Where("shape") + " element " + std::to_string(i) + " is " +
                        std::to_string(d) + ", expected a non-negative integer");
    }
    shape.push_back(d);
  }
  return shape;
}

Result<std::pair<uint64_t, uint64_t>> ParseOffsets(const JsonObject& entry) {
  const std::string where = entry.Where("data_offsets");
  const json* v = entry.Get("data_offsets");
  if (!v) return ParseError(where + " is missing");
  if (!v->is_array() || v->size() != 2) {
    return ParseError(where + " is " + DescribeJson(*v) + ", expected [begin, end]");
  }
  SLM_ASSIGN_OR_RETURN(uint64_t begin, JsonToUInt64((*v)[0], where + " begin", ErrorCode::kParseError));
  SLM_ASSIGN_OR_RETURN(uint64_t end, JsonToUInt64((*v)[1], where + " end", ErrorCode::kParseError));
  return std::make_pair(begin, end);
}

// Checks one header entry against the data section [data, data + data_size).
Result<TensorInfo> ParseTensorEntry(const std::string& name, const json& value,
                                    const std::shared_ptr<const MappedFile>& file,
                                    const uint8_t* data, uint64_t data_size) {
  const std::string where = TensorWhere(file->path(), name);
  if (!value.is_object()) {
    return ParseError(where + ": entry is " + DescribeJson(value) +
                      ", expected an object with dtype, shape and data_offsets");
  }
  JsonObject entry(value, where, "", ErrorCode::kParseError, ErrorCode::kParseError);
  TensorInfo t;
  t.name = name;
  t.file = file->path();
  t.mapping = file;
  SLM_ASSIGN_OR_RETURN(t.dtype, ParseDType(entry));
  SLM_ASSIGN_OR_RETURN(t.shape, ParseShape(entry));
  SLM_ASSIGN_OR_RETURN(auto offsets, ParseOffsets(entry));
  const auto [begin, end] = offsets;
  if (end < begin) {
    return ParseError(where + ": data_offsets " + OffsetsString(begin, end) +
                      " end before begin, expected begin <= end");
  }
  if (end > data_size) {
    return OutOfRange(where + ": data_offsets " + OffsetsString(begin, end) +
                      " end beyond the file's data section of " + std::to_string(data_size) +
                      " bytes");
  }
  Result<uint64_t> expected = CheckedByteSize(t.dtype, t.shape);
  if (!expected.ok()) return WithContext(expected.status(), where);
  if (end - begin != *expected) {
    return ParseError(where + ": data_offsets " + OffsetsString(begin, end) + " hold " +
                      std::to_string(end - begin) + " bytes, expected " +
                      std::to_string(*expected) + " for dtype " +
                      SafetensorsDTypeName(t.dtype) + " and shape " + ShapeToString(t.shape));
  }
  t.data = data + begin;
  t.nbytes = *expected;
  return t;
}

// Two tensors sharing bytes cannot both be what the header says they are.
Status CheckNoOverlap(std::vector<const TensorInfo*> tensors, const std::string& path) {
  std::erase_if(tensors, [](const TensorInfo* t) { return t->nbytes == 0; });
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
  for (size_t i = 1; i < tensors.size(); ++i) {
    const TensorInfo& prev = *tensors[i - 1];
    const TensorInfo& next = *tensors[i];
    if (next.data < prev.data + prev.nbytes) {
      return ParseError(path + ": tensors '" + prev.name + "' and '" + next.name +
                        "' overlap in the data section, expected disjoint data_offsets");
    }
  }
  return Status::Ok();
}

// Parses a whole file; the returned tensors point into `file`.
Result<std::vector<TensorInfo>> ParseFile(const std::shared_ptr<const MappedFile>& file) {
  const std::string& path = file->path();
  const uint64_t size = file->size();
  if (size < 8) {
    return ParseError(path + ": file is " + std::to_string(size) +
                      " bytes, too short for the 8-byte header length of a safetensors file");
  }
  uint64_t header_len;
  std::memcpy(&header_len, file->data(), 8);
  if (header_len > size - 8) {
    return OutOfRange(path + ": header length " + std::to_string(header_len) +
                      " runs beyond the file of " + std::to_string(size) + " bytes");
  }
  if (header_len > kMaxHeaderBytes) {
    return OutOfRange(path + ": header length " + std::to_string(header_len) +
                      " exceeds the format's limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  }
  std::string_view text(reinterpret_cast<const char*>(file->data()) + 8, header_len);
  SLM_ASSIGN_OR_RETURN(json header, ParseHeader(text, path));

  const uint8_t* data = file->data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<TensorInfo> tensors;
  tensors.reserve(header.size());
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      SLM_RETURN_IF_ERROR(CheckMetadata(value, path));
      continue;
    }
    SLM_ASSIGN_OR_RETURN(TensorInfo t, ParseTensorEntry(name, value, file, data, data_size));
    tensors.push_back(std::move(t));
  }
  std::vector<const TensorInfo*> views;
  for (const TensorInfo& t : tensors) views.push_back(&t);
  SLM_RETURN_IF_ERROR(CheckNoOverlap(std::move(views), path));
  return tensors;
}

// Shard names come from an untrusted index: keep them inside the checkpoint directory.
bool IsSafeRelativePath(const std::string& name) {
  if (name.empty()) return false;
  fs::path p(name);
  if (p.is_absolute() || p.has_root_name()) return false;
  return std::none_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; });
}

// weight_map of a sharded index: tensor name → shard file.
Result<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  SLM_ASSIGN_OR_RETURN(json index, ReadJsonFile(index_path));
  if (!index.is_object()) {
    return ParseError(index_path + ": is " + DescribeJson(index) +
                      ", expected an object with a 'weight_map'");
  }
  JsonObject root(index, index_path, "", ErrorCode::kParseError, ErrorCode::kParseError);
  SLM_ASSIGN_OR_RETURN(JsonObject weight_map, root.Object("weight_map"));
  std::map<std::string, std::string> result;
  for (const auto& [tensor, shard] : weight_map.value().items()) {
    SLM_ASSIGN_OR_RETURN(std::string file,
                         JsonToString(shard, weight_map.Where(tensor), ErrorCode::kParseError));
    if (!IsSafeRelativePath(file)) {
      return ParseError(weight_map.Where(tensor) + " is '" + file +
                        "', expected a file name inside the checkpoint directory");
    }
    result.emplace(tensor, std::move(file));
  }
  return result;
}

void ConvertToF32(const TensorInfo& t, uint64_t numel, uint8_t* dst) {
  switch (t.dtype) {
    case DType::kF32:
      if (numel) std::memcpy(dst, t.data, numel * 4);
      return;
    case DType::kF16:
    case DType::kBF16: {
      const bool bf16 = t.dtype == DType::kBF16;
      for (uint64_t i = 0; i < numel; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        const float f = bf16 ? BF16ToF32(h) : F16ToF32(h);
        std::memcpy(dst + 4 * i, &f, 4);
      }
      return;
    }
    default:
      return;  // rejected by CheckConvertible
  }
}

// Why `t` cannot be converted to float32, or OK. Returns its element count in *numel.
Status CheckConvertible(const TensorInfo& t, uint64_t* numel) {
  const std::string where = TensorWhere(t.file, t.name);
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) {
    return Unsupported(where + ": dtype " + SafetensorsDTypeName(t.dtype) +
                       " cannot be read as float32, expected F32, F16 or BF16");
  }
  Result<uint64_t> bytes = CheckedByteSize(t.dtype, t.shape);
  if (!bytes.ok()) return WithContext(bytes.status(), where);
  if (*bytes != t.nbytes) {
    return InvalidArgument(where + ": nbytes is " + std::to_string(t.nbytes) + ", expected " +
                           std::to_string(*bytes) + " for dtype " + SafetensorsDTypeName(t.dtype) +
                           " and shape " + ShapeToString(t.shape));
  }
  if (t.nbytes > 0 && t.data == nullptr) return InvalidArgument(where + ": data is null");
  *numel = *bytes / DTypeSize(t.dtype);
  return Status::Ok();
}

class F32ConstantSource final : public graph::ConstantSource {
 public:
  explicit F32ConstantSource(TensorInfo t) : t_(std::move(t)) {}
  Status Read(uint8_t* dst, uint64_t nbytes) const override {
    uint64_t numel = 0;
    SLM_RETURN_IF_ERROR(CheckConvertible(t_, &numel));
    if (nbytes / 4 != numel || nbytes % 4 != 0) {
      return Internal(Describe() + ": converts to " + std::to_string(numel * 4) +
                      " float32 bytes, reader asked for " + std::to_string(nbytes));
    }
    ConvertToF32(t_, numel, dst);
    // A NaN or Inf weight makes every output it reaches NaN: refuse it at compile time, naming
    // the tensor and the first bad element, rather than ship an artifact that emits garbage.
    const float* f = reinterpret_cast<const float*>(dst);
    for (uint64_t i = 0; i < numel; ++i) {
      if (!std::isfinite(f[i])) {
        return InvalidArgument(TensorWhere(t_.file, t_.name) + ": element " + std::to_string(i) +
                               " is " + (std::isnan(f[i]) ? "NaN" : f[i] > 0 ? "+Inf" : "-Inf") +
                               ", expected finite weights");
      }
    }
    return Status::Ok();
  }
  std::string Describe() const override { return TensorWhere(t_.file, t_.name) + " as float32"; }

 private:
  TensorInfo t_;
};

}  // namespace

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenFile(const std::string& path) {
  SafetensorsCheckpoint ckpt;
  SLM_RETURN_IF_ERROR(ckpt.AddFile(path));
  return ckpt;
}

Status SafetensorsCheckpoint::AddFile(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  SLM_ASSIGN_OR_RETURN(std::vector<TensorInfo> tensors, ParseFile(file));
  for (TensorInfo& t : tensors) {
    auto [it, inserted] = tensors_.try_emplace(t.name, std::move(t));
    if (!inserted) {  // names are unique within a file, so the other one is another shard
      return ParseError(TensorWhere(path, it->first) + ": also stored in " + it->second.file +
                        ", expected each tensor in one shard");
    }
  }
  files_.push_back(path);
  return Status::Ok();
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(dir + ": no such checkpoint directory");
  if (!fs::is_directory(dir, ec)) {
    return InvalidArgument(dir + ": is not a directory, expected a checkpoint directory");
  }
  const std::string single = (fs::path(dir) / kSafetensorsFileName).string();
  if (fs::exists(single, ec)) return OpenFile(single);
  const std::string index = (fs::path(dir) / kSafetensorsIndexName).string();
  if (!fs::exists(index, ec)) {
    return NotFound(dir + ": no " + kSafetensorsFileName + " or " + kSafetensorsIndexName +
                    " in the checkpoint directory");
  }

  SLM_ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(index));
  if (weight_map.empty()) return ParseError(index + ": weight_map is empty, expected tensors");
  auto shard_path = [&](const std::string& shard) { return (fs::path(dir) / shard).string(); };
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : weight_map) shards.insert(shard);
  SafetensorsCheckpoint ckpt;
  for (const std::string& shard : shards) {
    Status s = ckpt.AddFile(shard_path(shard));
    if (s.code() == ErrorCode::kNotFound) {
      return NotFound(index + ": shard '" + shard + "' listed in weight_map is missing (" +
                      s.message() + ")");
    }
    SLM_RETURN_IF_ERROR(s);
  }
  for (const auto& [tensor, shard] : weight_map) {
    const TensorInfo* t = ckpt.Find(tensor);
    if (t == nullptr || t->file != shard_path(shard)) {
      return NotFound(index + ": weight_map puts tensor '" + tensor + "' in shard '" + shard +
                      "', but that shard has no such tensor");
    }
  }
  return ckpt;
}

const TensorInfo* SafetensorsCheckpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsCheckpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

Status SafetensorsCheckpoint::ReadAsF32(const TensorInfo& t, float* dst) {
  uint64_t numel = 0;
  SLM_RETURN_IF_ERROR(CheckConvertible(t, &numel));
  ConvertToF32(t, numel, reinterpret_cast<uint8_t*>(dst));
  return Status::Ok();
}

std::shared_ptr<const graph::ConstantSource> MakeF32ConstantSource(TensorInfo t) {
  return std::make_shared<F32ConstantSource>(std::move(t));
}

}  // namespace slm::io
