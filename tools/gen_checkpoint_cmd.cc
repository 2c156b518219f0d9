// gen-checkpoint: a random-weight Llama checkpoint of given shapes (config.json +
// model.safetensors, no tokenizer), so anyone can reproduce the benchmark figures
// (docs/benchmarks.md). Weights ~ N(0, 0.02), norms 1; written tensor by tensor. Both files are
// written atomically, model.safetensors first and an old config.json removed before: an
// interrupted run leaves no config.json beside a truncated or mismatched weights file.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "tools/commands.h"

namespace slm::cli {
namespace {

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool ones = false;  // norm weights
};

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even
  return uint16_t(u >> 16);
}

}  // namespace

Action AddGenCheckpoint(CLI::App& app) {
  struct Args {
    std::string out, preset, dtype = "bf16";
    int64_t dim = 768, layers = 12, heads = 12, kv_heads = 0, ffn = 0, vocab = 32000, max_pos = 2048;
    bool tie = false;
    uint32_t seed = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("gen-checkpoint", "Write a random-weight Llama checkpoint of given shapes (for benchmarks)");
  cmd->add_option("-o,--output", a->out, "output directory")->required();
  cmd->add_option("--preset", a->preset, "110M (dim 768, 12 layers, 12 heads, ffn 2048) or 1B (dim 2048, 16 layers, 32/8 heads, ffn 8192); explicit flags override")
      ->check(CLI::IsMember({"110M", "1B"}));
  cmd->add_option("--dim", a->dim, "hidden size");
  cmd->add_option("--layers", a->layers, "layers");
  cmd->add_option("--heads", a->heads, "attention heads");
  cmd->add_option("--kv-heads", a->kv_heads, "key/value heads (default: --heads)");
  cmd->add_option("--ffn", a->ffn, "intermediate size (default: 8/3·dim rounded to 256)");
  cmd->add_option("--vocab", a->vocab, "vocabulary size");
  cmd->add_option("--max-pos", a->max_pos, "max_position_embeddings");
  cmd->add_option("--dtype", a->dtype, "tensor dtype in the file")->check(CLI::IsMember({"bf16", "f32"}))->capture_default_str();
  cmd->add_flag("--tie", a->tie, "tie lm_head to the embeddings");
  cmd->add_option("--seed", a->seed, "random seed");
  return [a, cmd]() {
    Args& x = *a;
    auto given = [&](const char* opt) { return cmd->count(opt) > 0; };
    if (x.preset == "110M") {
      if (!given("--dim")) x.dim = 768;
      if (!given("--layers")) x.layers = 12;
      if (!given("--heads")) x.heads = 12;
      if (!given("--ffn")) x.ffn = 2048;
    } else if (x.preset == "1B") {
      if (!given("--dim")) x.dim = 2048;
      if (!given("--layers")) x.layers = 16;
      if (!given("--heads")) x.heads = 32;
      if (!given("--kv-heads")) x.kv_heads = 8;
      if (!given("--ffn")) x.ffn = 8192;
    }
    if (x.kv_heads == 0) x.kv_heads = x.heads;
    if (x.ffn == 0) x.ffn = (x.dim * 8 / 3 + 255) / 256 * 256;
    if (x.dim <= 0 || x.layers <= 0 || x.heads <= 0 || x.kv_heads <= 0 || x.ffn <= 0 || x.vocab <= 0 ||
        x.max_pos <= 0 || x.dim % x.heads || x.heads % x.kv_heads) {
      return Fail(InvalidArgument("gen-checkpoint: need positive sizes, --dim divisible by --heads and --heads by --kv-heads"));
    }
    const int64_t hd = x.dim / x.heads;
    std::error_code ec;
    std::filesystem::create_directories(x.out, ec);
    if (ec) return Fail(InvalidArgument("gen-checkpoint: cannot create " + x.out + ": " + ec.message()));
    // A config.json of an earlier run would describe other weights if this one stopped between
    // the two files.
    std::filesystem::remove(x.out + "/config.json", ec);
    if (ec) return Fail(InvalidArgument("gen-checkpoint: cannot replace " + x.out + "/config.json: " + ec.message()));

    std::vector<Tensor> tensors = {{"model.embed_tokens.weight", {x.vocab, x.dim}}};
    for (int64_t i = 0; i < x.layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i);
      tensors.push_back({p + ".input_layernorm.weight", {x.dim}, true});
      tensors.push_back({p + ".self_attn.q_proj.weight", {x.heads * hd, x.dim}});
      tensors.push_back({p + ".self_attn.k_proj.weight", {x.kv_heads * hd, x.dim}});
      tensors.push_back({p + ".self_attn.v_proj.weight", {x.kv_heads * hd, x.dim}});
      tensors.push_back({p + ".self_attn.o_proj.weight", {x.dim, x.heads * hd}});
      tensors.push_back({p + ".post_attention_layernorm.weight", {x.dim}, true});
      tensors.push_back({p + ".mlp.gate_proj.weight", {x.ffn, x.dim}});
      tensors.push_back({p + ".mlp.up_proj.weight", {x.ffn, x.dim}});
      tensors.push_back({p + ".mlp.down_proj.weight", {x.dim, x.ffn}});
    }
    tensors.push_back({"model.norm.weight", {x.dim}, true});
    if (!x.tie) tensors.push_back({"lm_head.weight", {x.vocab, x.dim}});

    const size_t esize = x.dtype == "bf16" ? 2 : 4;
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    for (const Tensor& t : tensors) {
      uint64_t n = 1;
      for (int64_t d : t.shape) n *= uint64_t(d);
      header[t.name] = {{"dtype", esize == 2 ? "BF16" : "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * esize}}};
      offset += n * esize;
    }
    std::string h = header.dump();
    while ((h.size() + 8) % 8) h += ' ';
    Result<AtomicFileWriter> file = AtomicFileWriter::Create(x.out + "/model.safetensors");
    if (!file.ok()) return Fail(WithContext("gen-checkpoint", file.status()));
    AtomicFileWriter& f = *file;
    const uint64_t hl = h.size();
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = uint8_t(hl >> (8 * i));
    Status written = f.Write(le, 8);
    if (written.ok()) written = f.Write(h.data(), h.size());
    std::mt19937 rng(x.seed);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<uint8_t> buf;
    for (const Tensor& t : tensors) {
      if (!written.ok()) break;
      uint64_t n = 1;
      for (int64_t d : t.shape) n *= uint64_t(d);
      buf.resize(n * esize);
      for (uint64_t i = 0; i < n; ++i) {
        const float v = t.ones ? 1.0f : dist(rng);
        if (esize == 2) {
          const uint16_t b = ToBf16(v);
          std::memcpy(buf.data() + 2 * i, &b, 2);
        } else {
          std::memcpy(buf.data() + 4 * i, &v, 4);
        }
      }
      written = f.Write(buf.data(), buf.size());
    }
    if (written.ok()) written = f.Commit();
    if (!written.ok()) return Fail(WithContext("gen-checkpoint", written));

    nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                             {"hidden_size", x.dim}, {"intermediate_size", x.ffn},
                             {"num_hidden_layers", x.layers}, {"num_attention_heads", x.heads},
                             {"num_key_value_heads", x.kv_heads}, {"vocab_size", x.vocab},
                             {"max_position_embeddings", x.max_pos}, {"rms_norm_eps", 1e-5},
                             {"rope_theta", 10000.0}, {"hidden_act", "silu"},
                             {"tie_word_embeddings", x.tie}, {"bos_token_id", 1}, {"eos_token_id", 2},
                             {"torch_dtype", x.dtype == "bf16" ? "bfloat16" : "float32"}};
    if (Status s = WriteFileAtomically(x.out + "/config.json", config.dump(2) + "\n"); !s.ok()) {
      return Fail(WithContext("gen-checkpoint", s));
    }
    std::fprintf(stderr, "wrote %s: %.1f M parameters (%s)\n", x.out.c_str(), double(offset / esize) / 1e6, x.dtype.c_str());
    return 0;
  };
}

}  // namespace slm::cli
