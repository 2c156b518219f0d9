// Checked access to JSON read from untrusted files (safetensors headers, config.json, ...).
// nlohmann::json throws on bad input and on type mismatches; everything here catches and turns
// that into a Status whose message names the source, the field, what was found and what was
// expected. No exception leaves these functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace slm::io {

// Parses `text`. ParseError naming `source` and the parser's position when it is not JSON.
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& source);

// Reads and parses the file at `path`. NotFound when it does not exist; errors name the path.
Result<nlohmann::json> ReadJsonFile(const std::string& path);

// What a value is, for "found" in error messages: `a string ("64")`, `an integer (-3)`, `null`.
// Long values are cut short.
std::string DescribeJson(const nlohmann::json& value);

// Lenient read of an optional flag: `obj[key]` when `obj` is an object holding a boolean there,
// else `fallback` (absent, null or another type). For tokenizer.json flags, where transformers
// also falls back to the default instead of failing.
bool BoolFieldOr(const nlohmann::json& obj, const char* key, bool fallback);

// Conversions of one value. `what` names it in the message (e.g. "config.json: field
// 'hidden_size'"); `code` is the error code on a type or range mismatch.
Result<int64_t> JsonToInt64(const nlohmann::json& v, const std::string& what, ErrorCode code);
Result<uint64_t> JsonToUInt64(const nlohmann::json& v, const std::string& what, ErrorCode code);
Result<double> JsonToDouble(const nlohmann::json& v, const std::string& what, ErrorCode code);
Result<bool> JsonToBool(const nlohmann::json& v, const std::string& what, ErrorCode code);
Result<std::string> JsonToString(const nlohmann::json& v, const std::string& what,
                                 ErrorCode code);

// Typed, checked reads of the fields of one JSON object.
//
// Absent and null fields are the same ("not set"), as Python's None is in Hugging Face configs:
// the Or() getters return the fallback for both. A required field that is not set gives
// `missing_code`; a field of the wrong type gives `type_code`. Messages read
// "<source>: field '<prefix><key>' is a string ("64"), expected an integer".
class JsonObject {
 public:
  // `value` must outlive this view. If it is not an object, every field reads as not set, so
  // callers check `value.is_object()` first (Object() does that for nested objects).
  JsonObject(const nlohmann::json& value, std::string source, std::string prefix = "",
             ErrorCode type_code = ErrorCode::kInvalidArgument,
             ErrorCode missing_code = ErrorCode::kNotFound);

  // The field, or nullptr when absent or null.
  const nlohmann::json* Get(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key) != nullptr; }
  // "<source>: field '<prefix><key>'", for messages about a field's value.
  std::string Where(std::string_view key) const;

  Result<int64_t> Int(std::string_view key) const;
  Result<int64_t> IntOr(std::string_view key, int64_t fallback) const;
  Result<double> Number(std::string_view key) const;
  Result<double> NumberOr(std::string_view key, double fallback) const;
  Result<bool> BoolOr(std::string_view key, bool fallback) const;
  Result<std::string> String(std::string_view key) const;
  Result<std::string> StringOr(std::string_view key, std::string fallback) const;
  // A nested object, viewed with this object's codes and "<prefix><key>." as its prefix.
  Result<JsonObject> Object(std::string_view key) const;

  const std::string& source() const { return source_; }
  const nlohmann::json& value() const { return *value_; }

 private:
  Status Missing(std::string_view key) const;

  const nlohmann::json* value_;
  std::string source_;
  std::string prefix_;
  ErrorCode type_code_;
  ErrorCode missing_code_;
};

}  // namespace slm::io
