#include "core/status.h"

#include <gtest/gtest.h>

#include "core/dtype.h"

namespace slm {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  SLM_ASSIGN_OR_RETURN(int h, Half(x));
  SLM_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, AssignOrReturnPropagatesTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

TEST(DType, ByteSizeRejectsOverflowingShapes) {
  EXPECT_EQ(*CheckedByteSize(DType::kF32, {2, 3}), 24u);
  EXPECT_FALSE(CheckedByteSize(DType::kF32, {INT64_MAX / 2, 4}).ok());
  EXPECT_FALSE(CheckedByteSize(DType::kF32, {1LL << 40, 1LL << 40}).ok());
  EXPECT_FALSE(CheckedByteSize(DType::kF32, {-1, 4}).ok());
}

}  // namespace
}  // namespace slm
