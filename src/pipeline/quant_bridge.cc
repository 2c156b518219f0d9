#include "pipeline/quant_bridge.h"

#include "pipeline/adapters.h"
#include "quant/compile_quantized.h"
#include "quant/quantize.h"

namespace slm::pipeline {
namespace {

// A src/quant scheme as a Quantizer adapter. The calibration set (when the config names a
// calibration adapter) feeds the activation statistics: required by every method but rtn, and with rtn
// they add the per-tensor output SQNR to the report.
class QuantSchemeQuantizer final : public Quantizer {
 public:
  QuantSchemeQuantizer(quant::QuantConfig c, std::vector<std::string> override_texts)
      : config_(std::move(c)), override_texts_(std::move(override_texts)) {}
  std::string scheme() const override { return quant::SchemeName(config_.linear); }
  nlohmann::json Fingerprint() const override {
    nlohmann::json j = {{"scheme", quant::SchemeName(config_.linear)}, {"embeddings", quant::SchemeName(config_.embeddings)},
                        {"quantize_lm_head", config_.quantize_lm_head}, {"overrides", override_texts_},
                        {"method", quant::MethodName(config_.method)}, {"clip_search", config_.clip_search}};
    j.update(quant::MethodOptionsJson(config_));
    return j;
  }
  bool NeedsCalibration() const override { return config_.method != quant::Method::kRtn; }
  Status Apply(model::PreparedCompile& prepared, const CalibrationSet& calibration, nlohmann::json* report) override {
    if (config_.method != quant::Method::kRtn && calibration.samples.empty()) {
      return InvalidArgument("quantizer " + scheme() + " with method " + quant::MethodName(config_.method) +
                             " needs calibration samples: set stages.quantization.calibration (text_file, jsonl or random)");
    }
    quant::CalibrationInput input;
    input.samples = calibration.samples;
    SLM_ASSIGN_OR_RETURN(quant::QuantReport rep, quant::QuantizePrepared(prepared, config_, input));
    if (report != nullptr) {
      *report = rep.ToJson();
      (*report)["method"] = quant::MethodName(config_.method);
      (*report)["calibration"] = {{"source", calibration.source}, {"samples", calibration.samples.size()}};
    }
    return Status::Ok();
  }

 private:
  quant::QuantConfig config_;
  std::vector<std::string> override_texts_;
};

}  // namespace

void RegisterQuantSchemes(AdapterRegistry& registry) {
  // Adapter name = the base scheme; options: group (int4 / 8da4w), asymmetric, embeddings
  // (scheme text), quantize_lm_head, overrides ["pattern=scheme", ...], method (rtn | gptq | awq |
  // awq+gptq), percdamp, block_size, act_order (gptq), awq_grid, awq_search_rows (awq),
  // clip_search (int4 range search, every method).
  for (const char* base : {"int8", "int4", "8da8w", "8da4w"}) {
    registry.quantizers.Register(base, [base = std::string(base)](Options& o) -> std::unique_ptr<Quantizer> {
      quant::QuantConfig c;
      std::string text = base;
      const bool grouped = base == "int4" || base == "8da4w";
      if (grouped) {
        const int64_t g = o.Int("group", 32);
        if (g != 32 && g != 64 && g != 128) o.Error("group", "expected 32, 64 or 128, found " + std::to_string(g));
        else text += "-g" + std::to_string(g);
        if (o.Bool("asymmetric", false)) text += "-asym";
      }
      auto linear = quant::ParseScheme(text);
      if (!linear.ok()) o.Error("group", linear.status().message());
      else c.linear = *linear;
      const std::string emb = o.String("embeddings", "none");
      auto e = quant::ParseScheme(emb);
      if (!e.ok()) o.Error("embeddings", e.status().message());
      else c.embeddings = *e;
      c.quantize_lm_head = o.Bool("quantize_lm_head", false);
      // Calibration-aware quantization: method rtn (default) | gptq | awq | awq+gptq, and their knobs.
      auto method = quant::ParseMethod(o.String("method", "rtn"));
      if (!method.ok()) o.Error("method", method.status().message());
      else c.method = *method;
      c.gptq.percdamp = o.Double("percdamp", c.gptq.percdamp);
      if (!(c.gptq.percdamp >= 0)) o.Error("percdamp", "expected >= 0, found " + std::to_string(c.gptq.percdamp));
      c.gptq.block_size = o.Int("block_size", c.gptq.block_size, 1);
      c.gptq.act_order = o.Bool("act_order", c.gptq.act_order);
      c.awq.grid = o.Int("awq_grid", c.awq.grid, 1);
      c.awq.max_search_rows = o.Int("awq_search_rows", c.awq.max_search_rows, 1);
      c.clip_search = c.gptq.clip_search = o.Bool("clip_search", c.clip_search);
      std::vector<std::string> overrides = o.StringList("overrides");
      for (size_t i = 0; i < overrides.size(); ++i) {
        auto ov = quant::ParseOverride(overrides[i]);
        if (!ov.ok()) o.Error("overrides[" + std::to_string(i) + "]", ov.status().message());
        else c.overrides.push_back(*ov);
      }
      o.RejectUnknown();
      return std::make_unique<QuantSchemeQuantizer>(std::move(c), std::move(overrides));
    });
  }
}

}  // namespace slm::pipeline
