// Element types of tensors in graphs, artifacts and checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace slm {

// Values are part of the artifact format: never renumber, only append.
enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kI32 = 3,
  kI8 = 4,
  kU8 = 5,
  kI64 = 6,
};

size_t DTypeSize(DType t);
const char* DTypeName(DType t);  // "float32", "int32", ... (the contract's spelling)
std::optional<DType> DTypeFromName(std::string_view name);

using Shape = std::vector<int64_t>;
std::string ShapeToString(const Shape& shape);  // "[1, 32, 512]"

// Number of elements, or an error when a dimension is negative or the product overflows
// (shapes come from untrusted files).
Result<int64_t> CheckedNumElements(const Shape& shape);
// Bytes of a tensor, overflow-checked.
Result<uint64_t> CheckedByteSize(DType t, const Shape& shape);

}  // namespace slm
