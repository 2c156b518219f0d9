#include "graph/constant_lifting.h"

#include <gtest/gtest.h>

#include <atomic>

namespace slm::graph {
namespace {

std::shared_ptr<const ConstantSource> F32(std::vector<float> v, const std::string& what = "test") {
  return MakeF32Constant(v, what);
}

// Counts reads, and can be told to fail, to check how the lifter uses sources.
class CountingSource final : public ConstantSource {
 public:
  explicit CountingSource(std::vector<uint8_t> bytes, bool fail = false)
      : bytes_(std::move(bytes)), fail_(fail) {}
  Status Read(uint8_t* dst, uint64_t nbytes) const override {
    ++reads;
    if (fail_) return IoError("disk on fire");
    std::copy(bytes_.begin(), bytes_.end(), dst);
    return Status::Ok();
  }
  std::string Describe() const override { return "counting"; }
  mutable int reads = 0;

 private:
  std::vector<uint8_t> bytes_;
  bool fail_;
};

Graph Method(const std::string& name) {
  Graph g;
  g.name = name;
  return g;
}

TEST(LiftConstants, SameContentUnderDifferentNamesIsStoredOnce) {
  Graph prefill = Method("prefill"), decode = Method("decode");
  int32_t a = prefill.AddConstant("embed", DType::kF32, {2, 2}, F32({1, 2, 3, 4}));
  int32_t b = decode.AddConstant("lm_head", DType::kF32, {2, 2}, F32({1, 2, 3, 4}));
  auto table = LiftConstants({&prefill, &decode});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->size(), 1u);
  EXPECT_EQ((*table)[0].name, "embed");
  EXPECT_EQ((*table)[0].nbytes, 16u);
  EXPECT_EQ(prefill.values[a].constant_index, 0);
  EXPECT_EQ(decode.values[b].constant_index, 0);
}

TEST(LiftConstants, TiedWeightUsedTwiceInOneGraphIsStoredOnce) {
  Graph g = Method("decode");
  auto shared = F32({1, 2, 3, 4, 5, 6});
  int32_t embed = g.AddConstant("embed", DType::kF32, {3, 2}, shared);
  int32_t head = g.AddConstant("lm_head", DType::kF32, {3, 2}, shared);
  int32_t copy = g.AddConstant("lm_head_copy", DType::kF32, {3, 2}, F32({1, 2, 3, 4, 5, 6}));
  auto table = LiftConstants({&g});
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->size(), 1u);
  EXPECT_EQ(g.values[embed].constant_index, 0);
  EXPECT_EQ(g.values[head].constant_index, 0);
  EXPECT_EQ(g.values[copy].constant_index, 0);
}

TEST(LiftConstants, SameBytesWithDifferentShapeOrDTypeAreDistinct) {
  Graph g = Method("m");
  g.AddConstant("a", DType::kF32, {2, 3}, F32({1, 2, 3, 4, 5, 6}));
  g.AddConstant("b", DType::kF32, {3, 2}, F32({1, 2, 3, 4, 5, 6}));
  g.AddConstant("c", DType::kI32, {2, 3}, F32({1, 2, 3, 4, 5, 6}));
  auto table = LiftConstants({&g});
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->size(), 3u);
}

TEST(LiftConstants, SameNameDifferentContentGetsAFreshNameThatAvoidsExistingOnes) {
  // prefill and decode fold "inv_freq" differently. decode also has a constant named
  // "inv_freq.1" (seen only after decode's "inv_freq"), and prefill an intermediate named
  // "inv_freq.2": the rename must skip both.
  Graph prefill = Method("prefill"), decode = Method("decode");
  int32_t p = prefill.AddConstant("inv_freq", DType::kF32, {2}, F32({1, 2}));
  prefill.AddIntermediate("inv_freq.2", DType::kF32, {2});
  int32_t d = decode.AddConstant("inv_freq", DType::kF32, {2}, F32({3, 4}));
  int32_t d1 = decode.AddConstant("inv_freq.1", DType::kF32, {2}, F32({5, 6}));
  auto table = LiftConstants({&prefill, &decode});
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->size(), 3u);
  EXPECT_EQ((*table)[prefill.values[p].constant_index].name, "inv_freq");
  EXPECT_EQ((*table)[decode.values[d].constant_index].name, "inv_freq.3");
  EXPECT_EQ((*table)[decode.values[d1].constant_index].name, "inv_freq.1");
  // Value names are not changed: the table name is the storage identity.
  EXPECT_EQ(decode.values[d].name, "inv_freq");
}

TEST(LiftConstants, RenamesDoNotCollideWithEachOther) {
  Graph a = Method("a"), b = Method("b"), c = Method("c");
  a.AddConstant("t", DType::kF32, {1}, F32({1}));
  b.AddConstant("t", DType::kF32, {1}, F32({2}));
  c.AddConstant("t", DType::kF32, {1}, F32({3}));
  auto table = LiftConstants({&a, &b, &c});
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->size(), 3u);
  EXPECT_EQ((*table)[0].name, "t");
  EXPECT_EQ((*table)[1].name, "t.1");
  EXPECT_EQ((*table)[2].name, "t.2");
}

TEST(LiftConstants, SharedSourceIsReadOnceAndDistinctEqualSourcesAreCompared) {
  auto shared = std::make_shared<CountingSource>(std::vector<uint8_t>{1, 2, 3, 4});
  auto twin = std::make_shared<CountingSource>(std::vector<uint8_t>{1, 2, 3, 4});
  Graph prefill = Method("prefill"), decode = Method("decode");
  prefill.AddConstant("w", DType::kU8, {4}, shared);
  decode.AddConstant("w", DType::kU8, {4}, shared);
  decode.AddConstant("w_twin", DType::kU8, {4}, twin);
  auto table = LiftConstants({&prefill, &decode});
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->size(), 1u);
  // shared: hashed once, then re-read once to confirm equality with twin by bytes.
  EXPECT_EQ(shared->reads, 2);
  EXPECT_EQ(twin->reads, 2);
  EXPECT_EQ((*table)[0].source, shared);
}

TEST(LiftConstants, RelabelsFromScratchWhenRunAgain) {
  Graph g = Method("m");
  int32_t a = g.AddConstant("a", DType::kF32, {1}, F32({1}));
  int32_t b = g.AddConstant("b", DType::kF32, {1}, F32({2}));
  ASSERT_TRUE(LiftConstants({&g}).ok());
  auto again = LiftConstants({&g});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 2u);
  EXPECT_EQ(g.values[a].constant_index, 0);
  EXPECT_EQ(g.values[b].constant_index, 1);
}

TEST(LiftConstants, SourceErrorNamesTheConstantAndLeavesGraphsUnchanged) {
  Graph g = Method("decode");
  int32_t ok = g.AddConstant("fine", DType::kF32, {1}, F32({1}));
  g.AddConstant("broken", DType::kU8, {2},
                std::make_shared<CountingSource>(std::vector<uint8_t>{1, 2}, /*fail=*/true));
  auto table = LiftConstants({&g});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), ErrorCode::kIoError);
  EXPECT_NE(table.status().message().find("method 'decode' constant 'broken'"), std::string::npos)
      << table.status().message();
  EXPECT_EQ(g.values[ok].constant_index, -1);
}

TEST(LiftConstants, RejectsConstantWithoutSource) {
  Graph g = Method("m");
  g.AddConstant("nothing", DType::kF32, {1}, nullptr);
  auto table = LiftConstants({&g});
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("'nothing'"), std::string::npos);
  EXPECT_FALSE(LiftConstants({nullptr}).ok());
}

TEST(LiftConstants, HashesAreXxh64OfTheBytes) {
  Graph g = Method("m");
  g.AddConstant("empty", DType::kF32, {0}, F32({}));
  auto table = LiftConstants({&g});
  ASSERT_TRUE(table.ok());
  EXPECT_EQ((*table)[0].nbytes, 0u);
  EXPECT_EQ((*table)[0].xxh64, 0xEF46DB3751D8E999ull);  // XXH64 of no bytes, seed 0
}

}  // namespace
}  // namespace slm::graph
