#include "pipeline/quant_bridge.h"

#include "pipeline/adapters.h"
#include "quant/compile_quantized.h"
#include "quant/quantize.h"

namespace slm::pipeline {
namespace {

// A src/quant scheme as a Quantizer adapter. Weight-only and dynamic-activation schemes need no
// calibration: the calibration set is accepted (and recorded by the stage) but not used yet.
class QuantSchemeQuantizer final : public Quantizer {
 public:
  QuantSchemeQuantizer(quant::QuantConfig c, std::vector<std::string> override_texts)
      : config_(std::move(c)), override_texts_(std::move(override_texts)) {}
  std::string scheme() const override { return quant::SchemeName(config_.linear); }
  nlohmann::json Fingerprint() const override {
    return {{"scheme", quant::SchemeName(config_.linear)}, {"embeddings", quant::SchemeName(config_.embeddings)},
            {"quantize_lm_head", config_.quantize_lm_head}, {"overrides", override_texts_}};
  }
  Status Apply(model::PreparedCompile& prepared, const CalibrationSet&, nlohmann::json* report) override {
    SLM_ASSIGN_OR_RETURN(quant::QuantReport rep, quant::QuantizeGraphs(prepared.graphs, config_));
    quant::RecordQuantization(rep, config_, prepared);
    if (report != nullptr) *report = rep.ToJson();
    return Status::Ok();
  }

 private:
  quant::QuantConfig config_;
  std::vector<std::string> override_texts_;
};

}  // namespace

void RegisterQuantSchemes(AdapterRegistry& registry) {
  // Adapter name = the base scheme; options: group (int4 / 8da4w), asymmetric, embeddings
  // (scheme text), quantize_lm_head, overrides ["pattern=scheme", ...].
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
