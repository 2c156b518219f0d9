#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace slm::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kStories = slm::testing::SharedDir() + "/models/stories260K";

// One tensor of a synthetic safetensors file: raw little-endian bytes, laid out in order.
struct FakeTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "BF16", ...
  Shape shape;
  std::string bytes;
};

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Frames a header and a data section as a safetensors file: u64 LE length, header, data.
std::string Frame(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}

// A well-formed file holding `tensors` back to back in the data section.
std::string BuildSafetensors(const std::vector<FakeTensor>& tensors) {
  json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const FakeTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // writers pad so the data section is aligned
  return Frame(text, data);
}

// A fresh directory per test for checkpoint files; Write() returns the path of the file it wrote.
class CheckpointDir {
 public:
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string p = path_ + "/" + name;
    slm::testing::WriteFile(p, contents);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_ = slm::testing::MakeTempDir("safetensors");
};

class SafetensorsTest : public ::testing::Test {
 protected:
  // Writes `contents` as a single file and opens it, expecting failure.
  Status OpenBad(const std::string& contents) {
    const std::string path = dir_.Write("bad.safetensors", contents);
    auto r = SafetensorsCheckpoint::OpenFile(path);
    EXPECT_FALSE(r.ok()) << "opened a bad file";
    return r.ok() ? Status::Ok() : r.status();
  }
  // A header with one tensor entry `entry` named "w" over `data_bytes` bytes of data.
  Status OpenBadEntry(const json& entry, size_t data_bytes = 24) {
    return OpenBad(Frame(json{{"w", entry}}.dump(), std::string(data_bytes, '\0')));
  }

  CheckpointDir dir_;
};

std::vector<float> ReadF32(const TensorInfo& t) {
  auto numel = CheckedNumElements(t.shape);
  EXPECT_TRUE(numel.ok());
  std::vector<float> out(static_cast<size_t>(*numel), std::nanf(""));
  Status s = SafetensorsCheckpoint::ReadAsF32(t, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// --- the demo checkpoint ---------------------------------------------------------------------

TEST(Stories260K, ListsAll47TensorsWithTheirShapesAndNoLmHead) {
  auto ckpt = SafetensorsCheckpoint::OpenDir(kStories);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ckpt->size(), 47u);  // embed + final norm + 5 layers × 9
  std::vector<std::string> names = ckpt->Names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(ckpt->Find("lm_head.weight"), nullptr);  // tied
  EXPECT_EQ(ckpt->Find("__metadata__"), nullptr);

  const std::pair<const char*, Shape> expected[] = {
      {"model.embed_tokens.weight", {512, 64}},
      {"model.norm.weight", {64}},
      {"model.layers.0.self_attn.q_proj.weight", {64, 64}},
      {"model.layers.4.self_attn.k_proj.weight", {32, 64}},  // 4 KV heads × head_dim 8
      {"model.layers.2.self_attn.v_proj.weight", {32, 64}},
      {"model.layers.3.self_attn.o_proj.weight", {64, 64}},
      {"model.layers.1.mlp.gate_proj.weight", {172, 64}},
      {"model.layers.1.mlp.up_proj.weight", {172, 64}},
      {"model.layers.1.mlp.down_proj.weight", {64, 172}},
      {"model.layers.0.input_layernorm.weight", {64}},
      {"model.layers.0.post_attention_layernorm.weight", {64}},
  };
  for (const auto& [name, shape] : expected) {
    const TensorInfo* t = ckpt->Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->dtype, DType::kF32) << name;
    EXPECT_EQ(t->nbytes, *CheckedByteSize(DType::kF32, shape)) << name;
    EXPECT_EQ(t->file, kStories + "/model.safetensors");
  }
}

// The HF checkpoint was converted from llama2.c's stories260K.bin; the embedding and the
// attention norms were copied unchanged, so they must equal the .bin's floats bit for bit.
TEST(Stories260K, ReadAsF32MatchesTheLlama2cOriginal) {
  auto ckpt = SafetensorsCheckpoint::OpenDir(kStories);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  const std::string bin = slm::testing::ReadFile(kStories + "/stories260K.bin");
  constexpr size_t kHeader = 7 * 4, kVocab = 512, kDim = 64;
  ASSERT_GT(bin.size(), kHeader + (kVocab + 5) * kDim * 4);
  auto bin_floats = [&](size_t first, size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), bin.data() + kHeader + first * 4, n * 4);
    return v;
  };

  std::vector<float> embed = ReadF32(*ckpt->Find("model.embed_tokens.weight"));
  EXPECT_EQ(embed, bin_floats(0, kVocab * kDim));
  for (int layer = 0; layer < 5; ++layer) {
    const std::string name = "model.layers." + std::to_string(layer) + ".input_layernorm.weight";
    EXPECT_EQ(ReadF32(*ckpt->Find(name)), bin_floats(kVocab * kDim + layer * kDim, kDim)) << name;
  }
}

// --- conversions -----------------------------------------------------------------------------

TEST_F(SafetensorsTest, ReadAsF32WidensF16AndBF16Exactly) {
  // F16: 1, -2, 1/3 rounded (0x3555), 65504 (max), 2^-24 (smallest subnormal), +inf.
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x3555, 0x7BFF, 0x0001, 0x7C00};
  // BF16: 1, -3, 1/3 rounded (0x3EAB), 2^-133 (smallest subnormal), -0.
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x3EAB, 0x0001, 0x8000, 0x4049};
  const std::string path = dir_.Write(
      "model.safetensors",
      BuildSafetensors({{"h", "F16", {2, 3}, Bytes(f16)}, {"b", "BF16", {3, 2}, Bytes(bf16)}}));
  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();

  const TensorInfo* h = ckpt->Find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_EQ(h->shape, (Shape{2, 3}));
  EXPECT_EQ(ReadF32(*h), (std::vector<float>{1.0f, -2.0f, 0.333251953125f, 65504.0f,
                                             std::ldexp(1.0f, -24),
                                             std::numeric_limits<float>::infinity()}));

  const TensorInfo* b = ckpt->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  std::vector<float> bv = ReadF32(*b);
  EXPECT_EQ(bv, (std::vector<float>{1.0f, -3.0f, 0.333984375f, std::ldexp(1.0f, -133), -0.0f,
                                    3.140625f}));
  EXPECT_TRUE(std::signbit(bv[4]));
}

// The format does not align tensors: an F32 tensor after a 1-element F16 starts 2 bytes off.
TEST_F(SafetensorsTest, ReadsUnalignedTensors) {
  const std::vector<float> values = {1.5f, -0.25f, 3e-8f};
  const std::string path = dir_.Write(
      "model.safetensors",
      BuildSafetensors({{"a", "F16", {1}, Bytes(std::vector<uint16_t>{0x3C00})},
                        {"f", "F32", {3}, Bytes(values)}}));
  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ReadF32(*ckpt->Find("f")), values);
}

TEST_F(SafetensorsTest, AcceptsIntegerTensorsButRefusesToReadThemAsF32) {
  const std::string path = dir_.Write(
      "model.safetensors",
      BuildSafetensors({{"ids", "I64", {2}, Bytes(std::vector<int64_t>{7, 9})}}));
  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  const TensorInfo* t = ckpt->Find("ids");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kI64);
  float out[2];
  Status s = SafetensorsCheckpoint::ReadAsF32(*t, out);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("'ids'"));
  EXPECT_THAT(s.message(), HasSubstr("I64"));
}

TEST_F(SafetensorsTest, ReadAsF32RejectsATensorInfoWhoseSizeDoesNotMatchItsShape) {
  const std::vector<float> values = {1, 2, 3, 4};
  auto ckpt = SafetensorsCheckpoint::OpenFile(
      dir_.Write("model.safetensors", BuildSafetensors({{"w", "F32", {4}, Bytes(values)}})));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  TensorInfo t = *ckpt->Find("w");
  t.shape = {8};  // a caller-made inconsistency: reading would overrun the mapping
  std::vector<float> out(8);
  Status s = SafetensorsCheckpoint::ReadAsF32(t, out.data());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nbytes is 16, expected 32"));
}

TEST_F(SafetensorsTest, ConstantSourceConvertsLazilyAndOutlivesTheCheckpoint) {
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040};
  std::shared_ptr<const graph::ConstantSource> source;
  {
    auto ckpt = SafetensorsCheckpoint::OpenFile(
        dir_.Write("model.safetensors", BuildSafetensors({{"w", "BF16", {2}, Bytes(bf16)}})));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    source = MakeF32ConstantSource(*ckpt->Find("w"));
  }  // the checkpoint is gone; the source keeps the mapping alive
  float out[2] = {0, 0};
  ASSERT_TRUE(source->Read(reinterpret_cast<uint8_t*>(out), sizeof out).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_THAT(source->Describe(), HasSubstr("'w'"));
  Status s = source->Read(reinterpret_cast<uint8_t*>(out), 4);
  EXPECT_EQ(s.code(), ErrorCode::kInternal);
}

// --- sharded checkpoints ---------------------------------------------------------------------

class ShardedTest : public SafetensorsTest {
 protected:
  void SetUp() override {
    dir_.Write("model-00001-of-00002.safetensors",
               BuildSafetensors({{"a", "F32", {2}, Bytes(std::vector<float>{1, 2})},
                                 {"b", "F32", {1}, Bytes(std::vector<float>{3})}}));
    dir_.Write("model-00002-of-00002.safetensors",
               BuildSafetensors({{"c", "BF16", {1}, Bytes(std::vector<uint16_t>{0x4000})}}));
  }
  void WriteIndex(const json& weight_map) {
    dir_.Write("model.safetensors.index.json",
               json{{"metadata", {{"total_size", 14}}}, {"weight_map", weight_map}}.dump());
  }
  const json kWeightMap = {{"a", "model-00001-of-00002.safetensors"},
                           {"b", "model-00001-of-00002.safetensors"},
                           {"c", "model-00002-of-00002.safetensors"}};
};

TEST_F(ShardedTest, OpensEveryShardListedInTheIndex) {
  WriteIndex(kWeightMap);
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ckpt->Names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ckpt->files().size(), 2u);
  EXPECT_THAT(ckpt->Find("c")->file, HasSubstr("model-00002-of-00002.safetensors"));
  EXPECT_EQ(ReadF32(*ckpt->Find("a")), (std::vector<float>{1, 2}));
  EXPECT_EQ(ReadF32(*ckpt->Find("c")), (std::vector<float>{2}));
}

TEST_F(ShardedTest, MissingShardIsNotFoundNamingTheShardAndTheIndex) {
  json weight_map = kWeightMap;
  weight_map["d"] = "model-00003-of-00003.safetensors";
  WriteIndex(weight_map);
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("model-00003-of-00003.safetensors"));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("model.safetensors.index.json"));
}

TEST_F(ShardedTest, TensorAbsentFromItsShardIsNotFound) {
  json weight_map = kWeightMap;
  weight_map["c"] = "model-00001-of-00002.safetensors";  // it lives in shard 2
  WriteIndex(weight_map);
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("tensor 'c'"));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("model-00001-of-00002.safetensors"));
}

TEST_F(ShardedTest, TensorStoredInTwoShardsIsAParseError) {
  dir_.Write("model-00002-of-00002.safetensors",
             BuildSafetensors({{"a", "F32", {1}, Bytes(std::vector<float>{9})}}));
  WriteIndex({{"a", "model-00001-of-00002.safetensors"},
              {"b", "model-00002-of-00002.safetensors"}});
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kParseError);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("tensor 'a'"));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("also stored in"));
}

TEST_F(ShardedTest, ShardPathsMayNotLeaveTheDirectory) {
  WriteIndex({{"a", "../model-00001-of-00002.safetensors"}});
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kParseError);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("inside the checkpoint directory"));
}

TEST_F(ShardedTest, IndexWithoutWeightMapIsAParseError) {
  dir_.Write("model.safetensors.index.json", R"({"metadata": {}})");
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kParseError);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("'weight_map' is missing"));
}

// --- bad directories and files ---------------------------------------------------------------

TEST(SafetensorsDir, MissingDirectoryIsNotFoundNamingIt) {
  auto ckpt = SafetensorsCheckpoint::OpenDir("/nonexistent/slm-checkpoint");
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("/nonexistent/slm-checkpoint"));
}

TEST_F(SafetensorsTest, DirectoryWithoutSafetensorsIsNotFoundNamingWhatWasLookedFor) {
  dir_.Write("config.json", "{}");
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), HasSubstr(dir_.path()));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("model.safetensors.index.json"));
}

TEST_F(SafetensorsTest, FileShorterThanTheLengthFieldIsAParseError) {
  Status s = OpenBad("abcde");
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("bad.safetensors"));
  EXPECT_THAT(s.message(), HasSubstr("file is 5 bytes"));
}

TEST_F(SafetensorsTest, HeaderLengthBeyondTheFileIsOutOfRange) {
  std::string file = Frame("{}", "");
  file[0] = static_cast<char>(200);  // claims a 200-byte header in a 10-byte file
  Status s = OpenBad(file);
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("header length 200 runs beyond the file of 10 bytes"));
}

TEST_F(SafetensorsTest, HeaderThatIsNotJsonIsAParseError) {
  Status s = OpenBad(Frame("{\"w\": {\"dtype\": ", ""));
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("not valid JSON"));
}

TEST_F(SafetensorsTest, HeaderThatIsNotAnObjectIsAParseError) {
  Status s = OpenBad(Frame("[1, 2]", ""));
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("header is an array ([1,2]), expected a JSON object"));
}

TEST_F(SafetensorsTest, MissingOrIllTypedFieldsAreParseErrorsNamingTensorAndField) {
  Status s = OpenBadEntry({{"shape", {6}}, {"data_offsets", {0, 24}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': field 'dtype' is missing"));

  s = OpenBadEntry({{"dtype", "F32"}, {"shape", "6"}, {"data_offsets", {0, 24}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("field 'shape' is a string (\"6\"), expected an array"));

  s = OpenBadEntry({{"dtype", "F32"}, {"shape", {2, -3}}, {"data_offsets", {0, 24}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("element 1 is -3"));

  s = OpenBadEntry({{"dtype", "F32"}, {"shape", {6}}, {"data_offsets", {0, 12, 24}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("expected [begin, end]"));

  s = OpenBadEntry({{"dtype", "F32"}, {"shape", {6}}, {"data_offsets", {0, 2.5}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("end is a number (2.5), expected a non-negative integer"));

  s = OpenBadEntry(7);
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': entry is an integer (7)"));
}

TEST_F(SafetensorsTest, UnknownDtypeIsUnsupportedNamingTensorAndFile) {
  for (const char* dtype : {"F64", "F8_E4M3", "Q4_K"}) {
    Status s = OpenBadEntry({{"dtype", dtype}, {"shape", {3}}, {"data_offsets", {0, 24}}});
    EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << dtype;
    EXPECT_THAT(s.message(), HasSubstr("bad.safetensors: tensor 'w': dtype '" +
                                       std::string(dtype) + "' is not supported"));
    EXPECT_THAT(s.message(), HasSubstr("F32, F16, BF16"));
  }
}

TEST_F(SafetensorsTest, OffsetsEndingBeforeTheyBeginAreAParseError) {
  Status s = OpenBadEntry({{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 4}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("data_offsets [8, 4] end before begin"));
}

TEST_F(SafetensorsTest, OffsetsBeyondTheDataSectionAreOutOfRange) {
  Status s = OpenBad(Frame(
      R"({"model.norm.weight": {"dtype": "F32", "shape": [249999], "data_offsets": [0, 999996]}})",
      std::string(1024, '\0')));
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(s.message(),
              HasSubstr("bad.safetensors: tensor 'model.norm.weight': data_offsets [0, 999996] end "
                        "beyond the file's data section of 1024 bytes"));
}

TEST_F(SafetensorsTest, SizeThatDisagreesWithDtypeAndShapeIsAParseError) {
  Status s = OpenBadEntry({{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 8}}});
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': data_offsets [0, 8] hold 8 bytes, expected 24 "
                                     "for dtype F32 and shape [2, 3]"));
}

TEST_F(SafetensorsTest, ShapeWhoseSizeOverflowsIsOutOfRange) {
  Status s = OpenBadEntry(
      {{"dtype", "F32"}, {"shape", {1LL << 40, 1LL << 40}}, {"data_offsets", {0, 8}}});
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w'"));
  EXPECT_THAT(s.message(), HasSubstr("overflows"));
}

TEST_F(SafetensorsTest, TruncatedFileIsOutOfRange) {
  const std::string whole = BuildSafetensors(
      {{"a", "F32", {4}, Bytes(std::vector<float>{1, 2, 3, 4})},
       {"b", "F32", {4}, Bytes(std::vector<float>{5, 6, 7, 8})}});
  Status s = OpenBad(whole.substr(0, whole.size() - 6));  // the download stopped early
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'b': data_offsets [16, 32] end beyond the file's "
                                     "data section of 26 bytes"));
}

TEST_F(SafetensorsTest, OverlappingTensorsAreAParseError) {
  Status s = OpenBad(Frame(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           std::string(12, '\0')));
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("tensors 'a' and 'b' overlap"));
}

TEST_F(SafetensorsTest, DuplicateTensorNamesAreAParseError) {
  Status s = OpenBad(Frame(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                              "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                           std::string(8, '\0')));
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("lists tensor 'a' more than once"));
}

TEST_F(SafetensorsTest, MetadataMustMapStringsToStrings) {
  Status s = OpenBad(Frame(R"({"__metadata__": {"format": 1}})", ""));
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("'__metadata__' entry 'format' is an integer (1)"));
}

}  // namespace
}  // namespace slm::io
