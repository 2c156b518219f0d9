// Exact (erf) GELU end to end: a Gemma zoo checkpoint whose config says hidden_act "gelu"
// compiles, and its logits match a scalar forward pass built from the reference kernels with
// the exact GELU — not the tanh approximation the unedited checkpoint uses.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "kernels/reference.h"
#include "llm/runner.h"
#include "model/compiler.h"
#include "model/model_spec.h"
#include "model/rope.h"
#include "test_util.h"
#include "zoo_copy.h"

namespace slm::model {
namespace {

using nlohmann::json;

const std::vector<int32_t> kTokens = {1, 17, 300, 42, 5, 99, 250, 7, 3, 480, 11, 64};

// Gemma (1) forward over the whole sequence in one pass, scalar reference kernels only:
// logits [T, vocab]. `exact` picks the GELU.
std::vector<float> ReferenceLogits(const std::string& dir, bool exact) {
  auto spec_or = LoadModelSpec(dir);
  EXPECT_TRUE(spec_or.ok()) << spec_or.status().ToString();
  const ModelSpec& s = *spec_or;
  auto ckpt = io::SafetensorsCheckpoint::OpenDir(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  auto W = [&](const std::string& name) {
    const io::TensorInfo* t = ckpt->Find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> w(t ? t->nbytes / 4 : 0);
    if (t) {
      EXPECT_TRUE(io::SafetensorsCheckpoint::ReadAsF32(*t, w.data()).ok());
    }
    return w;
  };
  namespace ref = kernels::reference;
  const int64_t T = static_cast<int64_t>(kTokens.size()), D = s.hidden_size, V = s.vocab_size;
  const int64_t Hq = s.num_heads, Hkv = s.num_kv_heads, hd = s.head_dim, F = s.intermediate_size;
  const float eps = static_cast<float>(s.rms_norm_eps);
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(t);
  std::vector<float> mask(T * T);
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t c = 0; c < T; ++c) mask[r * T + c] = c <= r ? 0.0f : -INFINITY;
  }
  const RopeTables rope = ComputeRopeTables(s.rope);
  const std::vector<float> embed = W(s.EmbedName());
  std::vector<float> x(T * D), h(T * D), q(T * Hq * hd), k(T * Hkv * hd), v(T * Hkv * hd);
  std::vector<float> attn(T * Hq * hd), o(T * D), gate(T * F), up(T * F), act(T * F), down(T * D);
  std::vector<float> scratch(T + 1), dummy_cache(1);
  EXPECT_TRUE(ref::Embedding(kTokens.data(), embed.data(), x.data(), T, V, D, std::sqrt(static_cast<float>(D))));
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string P = s.LayerPrefix(i) + ".";
    ref::RmsNorm(x.data(), W(P + "input_layernorm.weight").data(), h.data(), T, D, eps, true);
    ref::MatMulF32(h.data(), W(P + "self_attn.q_proj.weight").data(), nullptr, q.data(), T, D, Hq * hd);
    ref::MatMulF32(h.data(), W(P + "self_attn.k_proj.weight").data(), nullptr, k.data(), T, D, Hkv * hd);
    ref::MatMulF32(h.data(), W(P + "self_attn.v_proj.weight").data(), nullptr, v.data(), T, D, Hkv * hd);
    ref::Rope(q.data(), pos.data(), rope.inv_freq.data(), q.data(), T, Hq, hd, s.rope.rotary_dim, rope.attention_scaling);
    ref::Rope(k.data(), pos.data(), rope.inv_freq.data(), k.data(), T, Hkv, hd, s.rope.rotary_dim, rope.attention_scaling);
    ref::Attention(q.data(), k.data(), v.data(), dummy_cache.data(), dummy_cache.data(), mask.data(), attn.data(),
                   scratch.data(), T, 0, Hq, Hkv, hd, static_cast<float>(s.attn_scale), 0.0f);
    ref::MatMulF32(attn.data(), W(P + "self_attn.o_proj.weight").data(), nullptr, o.data(), T, Hq * hd, D);
    ref::Add(x.data(), o.data(), x.data(), T * D);
    ref::RmsNorm(x.data(), W(P + "post_attention_layernorm.weight").data(), h.data(), T, D, eps, true);
    ref::MatMulF32(h.data(), W(P + "mlp.gate_proj.weight").data(), nullptr, gate.data(), T, D, F);
    ref::MatMulF32(h.data(), W(P + "mlp.up_proj.weight").data(), nullptr, up.data(), T, D, F);
    if (exact) {
      ref::GeGluErf(gate.data(), up.data(), act.data(), T * F);
    } else {
      ref::GeGlu(gate.data(), up.data(), act.data(), T * F);
    }
    ref::MatMulF32(act.data(), W(P + "mlp.down_proj.weight").data(), nullptr, down.data(), T, F, D);
    ref::Add(x.data(), down.data(), x.data(), T * D);
  }
  ref::RmsNorm(x.data(), W(s.FinalNormName()).data(), h.data(), T, D, eps, true);
  std::vector<float> logits(T * V);
  ref::MatMulF32(h.data(), W(s.LmHeadName()).data(), nullptr, logits.data(), T, D, V);
  return logits;
}

// The artifact's logits for every position, one decode call per token.
std::vector<float> ArtifactLogits(const std::string& dir) {
  const std::string out = testing::MakeTempDir("gelu-artifact") + "/model.slm";
  CompileOptions opt;
  opt.max_context_len = 32;
  opt.prefill_steps = {8};
  auto report = CompileCheckpoint(dir, out, opt);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  auto runner = llm::Runner::Load(out, {});
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  if (!runner.ok()) return {};
  std::vector<float> last((*runner)->metadata().vocab_size), all;
  Status st = (*runner)->session().FeedDecodeOnly(kTokens, last, &all);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return all;
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(ExactGelu, GemmaWithHiddenActGeluMatchesTheScalarExactGeluForward) {
  const std::string tanh_dir = testing::CopyZooCheckpoint("gemma", "gelu-tanh");
  const std::string exact_dir = testing::CopyZooCheckpoint("gemma", "gelu-exact");
  // GemmaMLP reads hidden_act (hidden_activation is ignored by transformers today).
  testing::EditJsonFile(exact_dir, "config.json", [](json& c) { c["hidden_act"] = "gelu"; });

  const std::vector<float> exact = ArtifactLogits(exact_dir), tanh_approx = ArtifactLogits(tanh_dir);
  const std::vector<float> ref_exact = ReferenceLogits(exact_dir, true);
  const std::vector<float> ref_tanh = ReferenceLogits(tanh_dir, false);
  ASSERT_EQ(exact.size(), kTokens.size() * 512);

  const float err_exact = MaxDiff(exact, ref_exact);    // kernels vs reference, exact GELU
  const float err_tanh = MaxDiff(tanh_approx, ref_tanh);  // same harness on the tanh model
  const float gap = MaxDiff(ref_exact, ref_tanh);         // what the choice of GELU moves
  std::printf("[ exact gelu ] max |Δlogit| vs reference: exact %.3g, tanh %.3g; exact vs tanh %.3g\n",
              err_exact, err_tanh, gap);
  EXPECT_LT(err_exact, 1e-4f);
  EXPECT_LT(err_tanh, 1e-4f);
  // The artifact follows the exact reference, not the tanh one: the GELU choice moves the
  // logits by far more than the kernels' error.
  EXPECT_GT(gap, 10 * err_exact);
  EXPECT_GT(MaxDiff(exact, ref_tanh), 5 * err_exact);
}

}  // namespace
}  // namespace slm::model
