// Int8 KV caches (cache format kv_int8_tokenhead_v1): every model passes the hf_static
// conformance suite with int8 caches (every path against the same artifact's one-token path),
// quality against the f32-cache artifact, cache bytes, and the load-time validation of the
// format's metadata (unknown format, wrong scale geometry).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "conformance_util.h"
#include "e2e/artifacts.h"
#include "llm/runner.h"
#include "llm/session_test_util.h"

namespace slm::testing {
namespace {

std::string CompileInt8(const std::string& model, int64_t max_context, std::vector<int64_t> steps,
                        bool state_outputs = false, model::SlidingMode sliding = model::SlidingMode::kRing) {
  model::CompileOptions opt;
  opt.prefill_steps = std::move(steps);
  opt.max_context_len = max_context;
  opt.state_outputs = state_outputs;
  opt.sliding_mode = sliding;
  opt.kv_cache = model::KvCacheDType::kInt8;
  const std::string path = MakeTempDir("kvq") + "/model.slm";
  auto report = model::CompileCheckpoint(SharedDir() + "/models/" + model, path, opt);
  EXPECT_TRUE(report.ok()) << model << ": " << report.status().ToString();
  return path;
}

// Cached: stories260K, prefill steps 4 and 16, 64-token context, int8 caches.
const std::string& SmallInt8Artifact() {
  static const std::string path = CompileInt8("stories260K", 64, {4, 16});
  return path;
}

class KvInt8Conformance : public ::testing::TestWithParam<ConformanceVariant> {};

// Chunk sizes, tails, near-context, reset, fork, snapshot, rewind, greedy: all against the
// one-token path of the same int8 artifact, at the suite's default tolerance.
TEST_P(KvInt8Conformance, EveryPathMatchesTheOneTokenPath) {
  const ConformanceVariant& c = GetParam();
  ExpectConformancePasses(CompileInt8(c.model, 48, {4, 16, 32}, c.state_outputs, c.sliding_mode()));
}

INSTANTIATE_TEST_SUITE_P(AllModels, KvInt8Conformance, ::testing::ValuesIn(AllConformanceVariants()),
                         ConformanceVariantName);

TEST(KvInt8Metadata, RecordsDtypeFormatAndScaleStatesWithExactGeometry) {
  auto file = io::ArtifactFile::Open(SmallInt8Artifact());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  nlohmann::json cache = nlohmann::json::parse((*file)->metadata_json())["cache"];
  EXPECT_EQ(cache["dtype"], "int8");
  EXPECT_EQ(cache["format"], "kv_int8_tokenhead_v1");
  const auto& layers = cache["layers"];
  ASSERT_EQ(cache["extra_states"].size(), 2 * layers.size());
  const auto& e0 = cache["extra_states"][0];
  EXPECT_EQ(e0["name"], "k_scale.0");
  EXPECT_EQ(e0["scales"], "k_cache.0");
  EXPECT_EQ(e0["dtype"], "float32");
  EXPECT_EQ(e0["shape"], nlohmann::json({1, layers[0]["n_kv_heads"].get<int64_t>(), 64}));
  EXPECT_EQ(cache["extra_states"][1]["name"], "v_scale.0");
  // An f32-cache artifact keeps the old metadata: no format field, no extra states.
  auto f32 = io::ArtifactFile::Open(SmallArtifact());
  ASSERT_TRUE(f32.ok());
  nlohmann::json c32 = nlohmann::json::parse((*f32)->metadata_json())["cache"];
  EXPECT_EQ(c32["dtype"], "float32");
  EXPECT_FALSE(c32.contains("format"));
  EXPECT_FALSE(c32.contains("extra_states"));
}

// Greedy decoding on TinyStories text, teacher-forced: the int8-cache artifact's top-1 agrees
// with the f32-cache artifact's on >= 95% of positions; the logits SQNR is printed.
TEST(KvInt8Quality, TeacherForcedTop1AgreesWithF32CachesOnStories260K) {
  const std::string model = SharedDir() + "/models/stories260K";
  const std::string f32_path = CompiledArtifact(model, {16}, 256);
  const std::string q8_path = CompileInt8("stories260K", 256, {16});
  auto f32 = LoadRunner(f32_path);
  auto q8 = LoadRunner(q8_path);
  ASSERT_TRUE(f32 && q8);
  ASSERT_NE(f32->tokenizer(), nullptr);
  std::string text = ReadFile(SharedDir() + "/data/tinystories-sample/tinystories_sample.txt");
  auto ids = f32->tokenizer()->Encode(text.substr(0, 2000));
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  std::vector<int32_t> seq = {*f32->session().metadata().bos_id};
  seq.insert(seq.end(), ids->begin(), ids->end());
  seq.resize(std::min<size_t>(seq.size(), 200));
  const int64_t V = f32->session().metadata().vocab_size;
  std::vector<float> last(V), a, b;
  ASSERT_TRUE(f32->session().FeedDecodeOnly(seq, last, &a).ok());
  ASSERT_TRUE(q8->session().FeedDecodeOnly(seq, last, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  int64_t agree = 0;
  double sig = 0, err = 0;
  const int64_t n = static_cast<int64_t>(seq.size());
  for (int64_t t = 0; t < n; ++t) {
    const float* x = a.data() + t * V;
    const float* y = b.data() + t * V;
    agree += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
    for (int64_t i = 0; i < V; ++i) {
      sig += double(x[i]) * x[i];
      err += double(x[i] - y[i]) * (x[i] - y[i]);
    }
  }
  const double agreement = double(agree) / double(n);
  const double sqnr = 10.0 * std::log10(sig / std::max(err, 1e-30));
  std::printf("stories260K int8 KV vs f32 KV: teacher-forced top-1 agreement %.1f%% over %lld positions, logits SQNR %.1f dB\n",
              100.0 * agreement, static_cast<long long>(n), sqnr);
  EXPECT_GE(agreement, 0.95);
  EXPECT_GT(sqnr, 20.0);
  // Not identical either: the int8 path really quantizes.
  EXPECT_GT(err, 0.0);
}

TEST(KvInt8Cli, InspectReportsCacheBytesHalvedOrBetter) {
  CommandResult r = RunCli("inspect --json " + SmallInt8Artifact());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& kv = j["kv_cache"];
  EXPECT_EQ(kv["dtype"], "int8");
  EXPECT_EQ(kv["format"], "kv_int8_tokenhead_v1");
  const uint64_t bytes = kv["bytes"].get<uint64_t>(), f32_bytes = kv["f32_bytes"].get<uint64_t>();
  std::printf("stories260K int8 KV cache: %llu bytes vs %llu bytes f32 (%.1f%%)\n", static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(f32_bytes), 100.0 * double(bytes) / double(f32_bytes));
  EXPECT_LE(2 * bytes, f32_bytes);
  CommandResult text = RunCli("inspect " + SmallInt8Artifact());
  EXPECT_NE(text.out.find("kv cache: dtype int8, format kv_int8_tokenhead_v1"), std::string::npos) << text.out;
}

TEST(KvInt8Cli, ConformanceCommandPassesOnAnInt8CacheArtifact) {
  CommandResult r = RunCli("conformance " + SmallInt8Artifact());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
}

TEST(KvInt8Cli, CompileOptionSelectsTheCacheDtype) {
  const std::string out = MakeTempDir("kvq_cli") + "/m.slm";
  CommandResult r = RunCli("compile " + SharedDir() + "/models/stories260K -o " + out + " --max-context 32 --prefill-step 8 --kv-cache int8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto file = io::ArtifactFile::Open(out);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(nlohmann::json::parse((*file)->metadata_json())["cache"]["format"], "kv_int8_tokenhead_v1");
  CommandResult bad = RunCli("compile " + SharedDir() + "/models/stories260K -o " + out + " --kv-cache int4");
  EXPECT_NE(bad.exit_code, 0);
}

// ---- load-time validation: each rewritten artifact breaks exactly one rule ----

Status OpenEdited(const std::function<void(nlohmann::json&)>& edit, const std::function<void(std::vector<graph::Graph>&)>& graphs = {}) {
  const std::string out = MakeTempDir("kvq_bad") + "/m.slm";
  SLM_RETURN_IF_ERROR(RewriteArtifact(SmallInt8Artifact(), out, edit, graphs));
  return OpenSession(out).status();
}

TEST(KvInt8Validation, UnknownCacheFormatIsRefusedNamingTheField) {
  Status st = OpenEdited([](nlohmann::json& m) { m["cache"]["format"] = "kv_int4_v9"; });
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.ToString();
  EXPECT_NE(st.message().find("metadata.cache.format 'kv_int4_v9'"), std::string::npos) << st.message();
}

TEST(KvInt8Validation, DtypeThatDisagreesWithTheFormatIsRefused) {
  Status st = OpenEdited([](nlohmann::json& m) { m["cache"]["dtype"] = "float32"; });
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.ToString();
  EXPECT_NE(st.message().find("metadata.cache.dtype 'float32'"), std::string::npos) << st.message();
}

TEST(KvInt8Validation, WrongScaleGeometryIsRefusedNamingTheEntry) {
  Status st = OpenEdited([](nlohmann::json& m) { m["cache"]["extra_states"][1]["shape"][2] = 63; });
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("metadata.cache.extra_states[1].shape is [1, 4, 63], expected [1, 4, 64]"), std::string::npos) << st.message();
}

TEST(KvInt8Validation, MissingOrMisnamedScaleStatesAreRefused) {
  Status missing = OpenEdited([](nlohmann::json& m) { m["cache"]["extra_states"].erase(m["cache"]["extra_states"].size() - 1); });
  EXPECT_EQ(missing.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("needs"), std::string::npos) << missing.message();
  Status renamed = OpenEdited([](nlohmann::json& m) { m["cache"]["extra_states"][0]["name"] = "k_scales.0"; });
  EXPECT_EQ(renamed.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(renamed.message().find("extra_states[0].name is 'k_scales.0', expected 'k_scale.0'"), std::string::npos) << renamed.message();
  Status dtype = OpenEdited([](nlohmann::json& m) { m["cache"]["extra_states"][0]["dtype"] = "float16"; });
  EXPECT_EQ(dtype.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(dtype.message().find("extra_states[0].dtype"), std::string::npos) << dtype.message();
}

TEST(KvInt8Validation, ProgramScaleStateThatDisagreesWithTheMetadataIsRefused) {
  // The metadata says [1, Hkv, 64]; the program's k_scale.0 is made [1, Hkv, 32]. The runtime's
  // op checks refuse the method before the session can bind a wrongly sized buffer.
  Status st = OpenEdited({}, [](std::vector<graph::Graph>& gs) {
    for (graph::Graph& g : gs) {
      const int32_t id = g.FindValue("k_scale.0");
      if (id >= 0) g.values[id].shape[2] = 32;
    }
  });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("k_scale.0"), std::string::npos) << st.message();
}

TEST(KvInt8Validation, F32ArtifactWithExtraStatesIsRefused) {
  const std::string out = MakeTempDir("kvq_bad") + "/m.slm";
  ASSERT_TRUE(RewriteArtifact(SmallArtifact(), out, [](nlohmann::json& m) {
    m["cache"]["extra_states"] = nlohmann::json::array({{{"name", "k_scale.0"}, {"scales", "k_cache.0"}, {"dtype", "float32"}, {"shape", {1, 1, 1}}}});
  }).ok());
  Status st = OpenSession(out).status();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("metadata.cache.extra_states"), std::string::npos) << st.message();
}

// ---- session state: reset, fork and snapshots carry the scales ----

TEST(KvInt8Session, SnapshotRestoresRowsAndScalesExactly) {
  auto a = OpenSession(SmallInt8Artifact());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const int64_t V = (*a)->metadata().vocab_size;
  std::vector<int32_t> seq = TestTokens(30, V);
  std::span<const int32_t> all(seq);
  std::vector<float> la(V), lb(V);
  ASSERT_TRUE((*a)->Feed(all.first(21), la).ok());
  const std::string path = MakeTempDir("kvq_snap") + "/s.snap";
  ASSERT_TRUE((*a)->SaveSnapshot(path).ok());
  auto b = OpenSession(SmallInt8Artifact());
  ASSERT_TRUE(b.ok());
  // Dirty b first, so a restore that forgot the scales would show.
  ASSERT_TRUE((*b)->Feed(TestTokens(40, V, 99), lb).ok());
  ASSERT_TRUE((*b)->LoadSnapshot(path).ok());
  ASSERT_TRUE((*a)->Feed(all.subspan(21), la).ok());
  ASSERT_TRUE((*b)->Feed(all.subspan(21), lb).ok());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  // An f32-cache session refuses the int8 snapshot, naming the field.
  auto f = OpenSession(SmallArtifact());
  ASSERT_TRUE(f.ok());
  Status st = (*f)->LoadSnapshot(path);
  EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("cache.dtype"), std::string::npos) << st.message();
}

TEST(KvInt8Session, ResetWithClearZeroesScalesAndEqualsFresh) {
  auto s = OpenSession(SmallInt8Artifact());
  ASSERT_TRUE(s.ok());
  const int64_t V = (*s)->metadata().vocab_size;
  std::vector<float> got(V), want(V);
  ASSERT_TRUE((*s)->Feed(TestTokens(33, V, 5), got).ok());
  (*s)->Reset(/*clear=*/true);
  ASSERT_TRUE((*s)->Feed(TestTokens(9, V), got).ok());
  auto fresh = OpenSession(SmallInt8Artifact());
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Feed(TestTokens(9, V), want).ok());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace slm::testing
