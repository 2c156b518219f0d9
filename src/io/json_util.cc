#include "io/json_util.h"

#include <exception>
#include <limits>

#include "core/mapped_file.h"

namespace slm::io {

using nlohmann::json;

Result<json> ParseJson(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return ParseError(source + ": not valid JSON: " + e.what());
  } catch (const std::exception& e) {  // e.g. bad_alloc on a huge document
    return ParseError(source + ": cannot parse JSON: " + e.what());
  }
}

Result<json> ReadJsonFile(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJson(text, path);
}

bool BoolFieldOr(const json& obj, const char* key, bool fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string DescribeJson(const json& value) {
  constexpr size_t kMaxShown = 60;
  std::string text;
  try {
    text = value.dump();
  } catch (const std::exception&) {  // invalid UTF-8 in a string cannot be dumped
    text = "<not printable>";
  }
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean (" + text + ")";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer (" + text + ")";
    case json::value_t::number_float: return "a number (" + text + ")";
    case json::value_t::string: return "a string (" + text + ")";
    case json::value_t::array: return "an array (" + text + ")";
    case json::value_t::object: return "an object (" + text + ")";
    default: return std::string(value.type_name());
  }
}

namespace {

Status Mismatch(const json& v, const std::string& what, const char* expected, ErrorCode code) {
  return Status(code, what + " is " + DescribeJson(v) + ", expected " + expected);
}

}  // namespace

Result<int64_t> JsonToInt64(const json& v, const std::string& what, ErrorCode code) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(u);
    }
    return Mismatch(v, what, "an integer that fits in 64 bits", code);
  }
  return Mismatch(v, what, "an integer", code);
}

Result<uint64_t> JsonToUInt64(const json& v, const std::string& what, ErrorCode code) {
  // nlohmann stores non-negative literals as unsigned, negative ones as signed.
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  return Mismatch(v, what, "a non-negative integer", code);
}

Result<double> JsonToDouble(const json& v, const std::string& what, ErrorCode code) {
  if (v.is_number()) return v.get<double>();
  return Mismatch(v, what, "a number", code);
}

Result<bool> JsonToBool(const json& v, const std::string& what, ErrorCode code) {
  if (v.is_boolean()) return v.get<bool>();
  return Mismatch(v, what, "true or false", code);
}

Result<std::string> JsonToString(const json& v, const std::string& what, ErrorCode code) {
  if (v.is_string()) return v.get<std::string>();
  return Mismatch(v, what, "a string", code);
}

JsonObject::JsonObject(const json& value, std::string source, std::string prefix,
                       ErrorCode type_code, ErrorCode missing_code)
    : value_(&value),
      source_(std::move(source)),
      prefix_(std::move(prefix)),
      type_code_(type_code),
      missing_code_(missing_code) {}

const json* JsonObject::Get(std::string_view key) const {
  if (!value_->is_object()) return nullptr;
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return nullptr;
  return &*it;
}

std::string JsonObject::Where(std::string_view key) const {
  return source_ + ": field '" + prefix_ + std::string(key) + "'";
}

Status JsonObject::Missing(std::string_view key) const {
  return Status(missing_code_, Where(key) + " is missing");
}

Result<int64_t> JsonObject::Int(std::string_view key) const {
  const json* v = Get(key);
  if (!v) return Missing(key);
  return JsonToInt64(*v, Where(key), type_code_);
}

Result<int64_t> JsonObject::IntOr(std::string_view key, int64_t fallback) const {
  return Has(key) ? Int(key) : Result<int64_t>(fallback);
}

Result<double> JsonObject::Number(std::string_view key) const {
  const json* v = Get(key);
  if (!v) return Missing(key);
  return JsonToDouble(*v, Where(key), type_code_);
}

Result<double> JsonObject::NumberOr(std::string_view key, double fallback) const {
  return Has(key) ? Number(key) : Result<double>(fallback);
}

Result<bool> JsonObject::BoolOr(std::string_view key, bool fallback) const {
  const json* v = Get(key);
  if (!v) return fallback;
  return JsonToBool(*v, Where(key), type_code_);
}

Result<std::string> JsonObject::String(std::string_view key) const {
  const json* v = Get(key);
  if (!v) return Missing(key);
  return JsonToString(*v, Where(key), type_code_);
}

Result<std::string> JsonObject::StringOr(std::string_view key, std::string fallback) const {
  return Has(key) ? String(key) : Result<std::string>(std::move(fallback));
}

Result<JsonObject> JsonObject::Object(std::string_view key) const {
  const json* v = Get(key);
  if (!v) return Missing(key);
  if (!v->is_object()) return Mismatch(*v, Where(key), "an object", type_code_);
  return JsonObject(*v, source_, prefix_ + std::string(key) + ".", type_code_, missing_code_);
}

}  // namespace slm::io
