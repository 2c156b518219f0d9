#include "core/dtype.h"

namespace slm {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kI64: return 8;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI32: return "int32";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kI64: return "int64";
  }
  return "unknown";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI8, DType::kU8,
                  DType::kI64}) {
    if (name == DTypeName(t)) return t;
  }
  return std::nullopt;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<int64_t> CheckedNumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return OutOfRange("negative dimension in shape " + ShapeToString(shape));
    if (d != 0 && n > INT64_MAX / d) return OutOfRange("shape " + ShapeToString(shape) + " overflows");
    n *= d;
  }
  return n;
}

Result<uint64_t> CheckedByteSize(DType t, const Shape& shape) {
  SLM_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  uint64_t size = DTypeSize(t);
  if (n != 0 && static_cast<uint64_t>(n) > UINT64_MAX / size) {
    return OutOfRange("byte size of shape " + ShapeToString(shape) + " overflows");
  }
  return static_cast<uint64_t>(n) * size;
}

}  // namespace slm
