// Whole models on every kernel path this machine can take. The kernel tests check each SIMD body
// against its scalar reference; here the artifacts run end to end as they would on an older or
// smaller x86 CPU: each Highway target this build compiled and the CPU supports (here AVX3, AVX2,
// SSE4, SSSE3 and SCALAR) with the AVX-512 VNNI intrinsic bodies switched off ("AVX2 without
// VNNI" is a plain AVX2 machine), and for the quantized schemes also AVX2 with the AVX-VNNI
// bodies (an Alder Lake class CPU, where the CPU has AVX-VNNI), and for 8da4w / 8da8w on a CPU
// with AMX the best target's VNNI bodies without the AMX panels; their logits are compared with
// those of the best path (the default dispatch).
// Every scheme and cache type that has target-specific kernels: f32, int8, int4 (symmetric and
// asymmetric groups), 8da4w, 8da8w, the int8 KV cache; prefill chunks of 32 rows so the panel
// GEMMs run as well as the decode tiles. And on every such path the contract's conformance
// suite passes: the panel GEMM starts at two vectors of rows, so its chunks differ by target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "e2e/artifacts.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"
#include "llm/conformance.h"
#include "quant/compile_quantized.h"
#include "quant/quantize.h"

namespace slm::testing {
namespace {

struct PathCase {
  std::string model;   // "stories260K" or a zoo family
  std::string scheme;  // "none" = f32 weights
  model::KvCacheDType kv = model::KvCacheDType::kF32;
};

void PrintTo(const PathCase& c, std::ostream* os) {
  *os << c.model << " " << c.scheme << " kv " << model::KvCacheDTypeName(c.kv);
}

std::string CheckpointDir(const std::string& model) {
  return model == "stories260K" ? Stories() : SharedDir() + "/models/zoo/" + model;
}

std::string PathCaseName(const ::testing::TestParamInfo<PathCase>& i) {
  std::string n = i.param.model + "_" + i.param.scheme + "_kv_" + model::KvCacheDTypeName(i.param.kv);
  for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

std::string Artifact(const PathCase& c, std::vector<int64_t> steps, int64_t max_context) {
  const std::string path = MakeTempDir("simd_paths") + "/model.slm";
  model::CompileOptions opt;
  opt.prefill_steps = std::move(steps);
  opt.max_context_len = max_context;
  opt.kv_cache = c.kv;
  quant::QuantConfig qc;
  auto scheme = quant::ParseScheme(c.scheme);
  EXPECT_TRUE(scheme.ok()) << scheme.status().ToString();
  if (!scheme.ok()) return "";
  qc.linear = *scheme;
  auto r = quant::CompileQuantized(CheckpointDir(c.model), path, opt, qc);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? path : "";
}

// What one dispatch path computes for the same prompt: the decode path's logits at every
// position, the chunked prefill's last logits (one full chunk of 32 rows plus a padded one) and
// the greedy continuation after it.
struct PathOutputs {
  std::vector<float> decode_logits;  // [prompt, vocab]
  std::vector<float> prefill_last;   // [vocab]
  std::vector<int32_t> greedy;
};

PathOutputs RunPath(const std::string& path, const std::vector<int32_t>& prompt) {
  PathOutputs out;
  auto r = LoadRunner(path);
  if (!r) return out;
  llm::Session& s = r->session();
  std::vector<float> last(static_cast<size_t>(s.vocab_size()));
  EXPECT_TRUE(s.FeedDecodeOnly(prompt, last, &out.decode_logits).ok());
  s.Reset(/*clear=*/true);
  out.prefill_last.resize(last.size());
  EXPECT_TRUE(s.Feed(prompt, out.prefill_last).ok());
  s.Reset(/*clear=*/true);
  llm::GenerateOptions opt;
  opt.max_new_tokens = 8;
  opt.stop_on_eos = false;
  auto g = r->Generate(prompt, opt);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (g.ok()) out.greedy = g->generated;
  return out;
}

// Restores the default dispatch however the test ends.
struct DefaultDispatch {
  ~DefaultDispatch() {
    kernels::ForceSimdTargetForTest(0);
    kernels::SetVnniEnabledForTest(true);
    kernels::SetAmxEnabledForTest(true);
    kernels::SetAvxVnniEnabledForTest(true);
    kernels::SetDotprodEnabledForTest(true);
    kernels::SetI8mmEnabledForTest(true);
  }
};

// One kernel path besides the default: a Highway target with the AVX-512 VNNI bodies off, the
// AVX-VNNI bodies on or off (on only with AVX2: an Alder Lake class CPU), and on aarch64 the
// dot-product bodies on or off (off: a core without `sdot`, e.g. Cortex-A53 / A72), with the
// int8 matrix multiply on or off (off: a core with `sdot` and without `smmla`, e.g. Cortex-A76).
struct KernelPath {
  int64_t target;
  bool avx_vnni = false;
  bool dotprod = false;
  bool i8mm = false;
  bool vnni_without_amx = false;  // the AVX-512 VNNI bodies with the AMX panel off (an Ice Lake class CPU)
  std::string Name() const {
    const std::string name = hwy::TargetName(target);
    if (vnni_without_amx) return name + " with VNNI, without AMX";
    if (avx_vnni) return name + " with AVX-VNNI";
    if (dotprod) return name + (i8mm ? " with dot product and i8mm" : " with dot product");
    return name + (HWY_ARCH_ARM ? " without dot product" : " without VNNI");
  }
  void Select() const {
    kernels::ForceSimdTargetForTest(target);
    kernels::SetVnniEnabledForTest(vnni_without_amx);
    kernels::SetAmxEnabledForTest(false);
    kernels::SetAvxVnniEnabledForTest(avx_vnni);
    kernels::SetDotprodEnabledForTest(dotprod);
    kernels::SetI8mmEnabledForTest(i8mm);
  }
};

// Every target this CPU supports without VNNI; AVX2 with AVX-VNNI where the CPU has it and the
// scheme reaches those bodies (every quantized one: the dynamic products, int4 and int8
// weight-only decode); on aarch64 every target with the dot product (and the int8 matrix
// multiply) where the CPU has it, and for the dynamic schemes NEON with the dot product but not
// the matrix multiply (the sdot prefill panels) and without either. Call before forcing any target.
std::vector<KernelPath> PathsBesidesTheDefault(const std::string& scheme) {
  std::vector<KernelPath> paths;
  const bool avx_vnni = kernels::AvxVnniAvailable() && scheme != "none";
  const bool dotprod = kernels::DotprodAvailable(), i8mm = kernels::I8mmAvailable();
  const bool dynamic = scheme.rfind("8da", 0) == 0;
  // Where the default path runs the dynamic prefill products on AMX, the VNNI panels it replaces.
  if (kernels::AmxAvailable() && scheme.rfind("8da", 0) == 0) {
    paths.push_back({kernels::SupportedSimdTargets().front(), false, false, false, true});
  }
  for (int64_t t : kernels::SupportedSimdTargets()) {
    if (avx_vnni && t == HWY_AVX2) paths.push_back({t, true, false, false});
    paths.push_back({t, false, dotprod, i8mm});
    if (i8mm && t == HWY_NEON && dynamic) paths.push_back({t, false, true, false});
    if (dotprod && t == HWY_NEON && dynamic) paths.push_back({t, false, false, false});
  }
  return paths;
}

class SimdTargetPaths : public ::testing::TestWithParam<PathCase> {};

TEST_P(SimdTargetPaths, EveryOtherKernelPathGivesTheBestPathsLogitsAndTokens) {
  const PathCase& c = GetParam();
  const std::string path = Artifact(c, {32}, 96);
  ASSERT_FALSE(path.empty());
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);

  const std::vector<KernelPath> paths = PathsBesidesTheDefault(c.scheme);
  DefaultDispatch restore;
  const PathOutputs best = RunPath(path, prompt);
  ASSERT_EQ(best.decode_logits.size(), prompt.size() * best.prefill_last.size());
  const size_t vocab = best.prefill_last.size();
  const float peak = llm::LogitScale(best.decode_logits);
  // Between paths only the f32 summation order differs: logits within the conformance bound,
  // relative to the largest logit. Where values are also rounded to int8 at run time (the
  // activations of 8da*, the int8 KV cache) an input that differs in its last bit can land on
  // the other side of a rounding boundary: one flipped code moved stories260K's logits by up to
  // 0.26 (of 16.6) from the position it was written on (8da4w + int8 cache, SSE4 against AVX3).
  // Those paths are held to a logits SQNR: flips measured 48.8-51.8 dB, a KV quantizer that
  // truncated instead of rounding in its SIMD loop 33.5-36.1 dB. (On the random zoo models a flip
  // cost 39 dB, too close: they run the weight-only and f32 paths only.)
  const bool rounds_at_run_time = c.scheme.rfind("8da", 0) == 0 || c.kv == model::KvCacheDType::kInt8;
  const llm::ConformanceOptions conformance;
  const float tolerance = conformance.logit_tolerance * peak;
  // Prefill against decode on one path: the conformance suite's bound (for int8 caches its
  // looser one: a flipped K/V code between the two orders is expected there too).
  const float own_tolerance = peak * (c.kv == model::KvCacheDType::kInt8 ? conformance.int8_cache_logit_tolerance
                                                                          : conformance.logit_tolerance);
  for (const KernelPath& p : paths) {
    p.Select();
    const std::string path_name = p.Name();
    const char* name = path_name.c_str();
    const PathOutputs got = RunPath(path, prompt);
    ASSERT_EQ(got.decode_logits.size(), best.decode_logits.size()) << name;
    const float decode_diff = MaxAbsDiff(best.decode_logits.data(), got.decode_logits.data(), best.decode_logits.size());
    const float prefill_diff = MaxAbsDiff(best.prefill_last.data(), got.prefill_last.data(), vocab);
    const double decode_sqnr = quant::SqnrDb(best.decode_logits.data(), got.decode_logits.data(), best.decode_logits.size());
    // Within the path, the contract's conformance: chunked prefill = the one-token path.
    const float own_diff = MaxAbsDiff(got.decode_logits.data() + (prompt.size() - 1) * vocab, got.prefill_last.data(), vocab);
    std::printf("[ PATHS ] %s %s kv %s, %s: decode max diff %.2e (SQNR %.1f dB), prefill %.2e, "
                "own prefill vs decode %.2e (peak %.1f)\n", c.model.c_str(), c.scheme.c_str(),
                model::KvCacheDTypeName(c.kv), name, decode_diff, decode_sqnr, prefill_diff, own_diff, peak);
    if (rounds_at_run_time) {
      EXPECT_GE(decode_sqnr, 40.0) << name << ": decode logits";
      EXPECT_GE(quant::SqnrDb(best.prefill_last.data(), got.prefill_last.data(), vocab), 40.0) << name << ": prefill logits";
    } else {
      EXPECT_LE(decode_diff, tolerance) << name << ": decode logits";
      EXPECT_LE(prefill_diff, tolerance) << name << ": prefill logits";
    }
    EXPECT_LE(own_diff, own_tolerance) << name << ": its prefill against its decode";
    EXPECT_EQ(got.greedy, best.greedy) << name << ": greedy tokens";
  }
}

std::vector<PathCase> AllPathCases() {
  std::vector<PathCase> cases;
  for (const char* scheme : {"none", "int8", "int4-g32", "int4-g64-asym", "8da4w-g32", "8da8w"}) {
    cases.push_back({"stories260K", scheme});
  }
  for (const char* scheme : {"none", "int8", "8da8w", "8da4w-g32"}) {
    cases.push_back({"stories260K", scheme, model::KvCacheDType::kInt8});
  }
  // Families whose graphs use kernels stories260K does not: sliding rings, soft-capping and
  // GELU-tanh (gemma2), q/k norms (qwen3).
  for (const char* model : {"gemma2", "qwen3"}) {
    for (const char* scheme : {"none", "int4-g32"}) cases.push_back({model, scheme});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, SimdTargetPaths, ::testing::ValuesIn(AllPathCases()), PathCaseName);

// The conformance suite (every chunk size, tail policy, near-context tail, fork, snapshot...
// against the one-token path) on the default path (with the AVX-512 VNNI bodies where the CPU
// has them) and on each other kernel path (PathsBesidesTheDefault), with steps on both sides of
// every target's panel threshold (8 rows on SSE4, 16 on AVX2, 32 on AVX3 and for the VNNI panels).
// On AVX2 with AVX-VNNI, the 8da* products run the AVX-VNNI tiles (decode) and panels (from 16
// rows), the Highway tiles in between; int4 and int8 decode the AVX-VNNI split-x bodies.
class SimdTargetConformance : public ::testing::TestWithParam<PathCase> {};

TEST_P(SimdTargetConformance, PassesOnTheDefaultPathAndEveryOtherKernelPath) {
  const PathCase& c = GetParam();
  const std::string path = Artifact(c, {4, 16, 32}, 48);
  ASSERT_FALSE(path.empty());
  const std::vector<KernelPath> paths = PathsBesidesTheDefault(c.scheme);
  DefaultDispatch restore;
  for (size_t i = 0; i <= paths.size(); ++i) {  // 0: the default dispatch, then each path
    if (i > 0) paths[i - 1].Select();
    auto report = llm::RunConformance(path);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    float scaled = 0, absolute = 0;
    for (const auto& k : report->cases) {
      scaled = std::max(scaled, k.max_scaled_logit_diff);
      absolute = std::max(absolute, k.max_logit_diff);
    }
    const std::string name = i == 0 ? "default dispatch" : paths[i - 1].Name();
    std::printf("[ CONFORMANCE ] %s %s kv %s, %s: %lld cases, max |dlogit| %.2e, of the largest logit %.2e\n",
                c.model.c_str(), c.scheme.c_str(), model::KvCacheDTypeName(c.kv), name.c_str(),
                static_cast<long long>(report->cases.size()), absolute, scaled);
    EXPECT_TRUE(report->passed()) << name << "\n" << report->ToTable();
    EXPECT_GT(report->cases.size(), 40u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SimdTargetConformance,
                         ::testing::Values(PathCase{"stories260K", "none"}, PathCase{"stories260K", "int4-g32"},
                                           PathCase{"stories260K", "8da4w-g32"}, PathCase{"stories260K", "8da4w-g32-asym"},
                                           PathCase{"stories260K", "8da8w"}, PathCase{"stories260K", "int8"},
                                           PathCase{"stories260K", "8da4w-g32", model::KvCacheDType::kInt8},
                                           PathCase{"llama", "none"}, PathCase{"gemma2", "none"},
                                           PathCase{"mistral", "none", model::KvCacheDType::kInt8},
                                           PathCase{"phi3", "none", model::KvCacheDType::kInt8}),
                         PathCaseName);

}  // namespace
}  // namespace slm::testing
