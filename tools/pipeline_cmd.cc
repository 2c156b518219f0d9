// `staticlm pipeline run config.yaml [--only STAGE] [--from STAGE] [--force]`, and the
// standalone stage subcommands `prepare`, `quantize`, `infer` (a config, run up to / only that
// stage). All go through pipeline::Pipeline::FromYamlFile, the library's one construction path.
#include <cmath>
#include <cstdio>

#include "pipeline/pipeline.h"
#include "tools/commands.h"

namespace slm::cli {
namespace {

std::string Db(double v) {
  if (std::isinf(v)) return "inf (identical to the reference)";
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f dB", v);
  return b;
}

void PrintSummary(const pipeline::RunReport& r) {
  double work = 0;
  for (const auto& s : r.stages) {
    std::fprintf(stderr, "  %-18s %-12s %8.1f ms  %s\n", pipeline::StageName(s.stage), s.status.c_str(), s.ms,
                 s.reason.c_str());
  }
  const auto& st = r.state;
  if (st.inference) {
    for (const auto& o : st.inference->outputs) {
      std::printf("== generated (%s)\n%s%s\n", st.inference->device.c_str(), o.prompt.c_str(), o.text.c_str());
      std::printf("== speed: %s\n", o.stats.ToText().c_str());
    }
  }
  if (st.evaluation) {
    if (st.evaluation->has_perplexity) {
      const auto& p = st.evaluation->perplexity;
      std::printf("== perplexity: %.3f over %lld tokens (%lld windows, %.0f tok/s)\n", p.perplexity,
                  static_cast<long long>(p.tokens_scored), static_cast<long long>(p.windows), p.tok_per_s);
    }
    if (st.evaluation->has_comparison) {
      const auto& c = st.evaluation->comparison;
      std::printf("== SQNR vs unquantized: logits %s, top-1 agreement %.1f%% over %lld tokens\n",
                  Db(c.logits_sqnr_db).c_str(), 100 * c.top1_agreement, static_cast<long long>(c.tokens));
      for (const auto& l : c.layers) std::printf("   %-10s %s\n", l.layer.c_str(), Db(l.sqnr_db).c_str());
    }
  }
  (void)work;
  std::printf("== pipeline work %.1f ms; report %s\n", r.total_ms, r.report_html_path.c_str());
}

struct Args {
  std::string config, only, from;
  bool force = false, quiet = false;
};

int RunPipeline(const Args& a, std::optional<pipeline::StageId> only_override) {
  auto p = pipeline::Pipeline::FromYamlFile(a.config);
  if (!p.ok()) return Fail(p.status());
  pipeline::RunOptions ro;
  ro.force = a.force;
  ro.progress = !a.quiet;
  if (only_override) ro.only = only_override;
  if (!a.only.empty()) {
    auto s = pipeline::ParseStage(a.only);
    if (!s.ok()) return Fail(s.status());
    ro.only = *s;
  }
  if (!a.from.empty()) {
    auto s = pipeline::ParseStage(a.from);
    if (!s.ok()) return Fail(s.status());
    ro.from = *s;
  }
  auto r = (*p)->Run(ro);
  if (!r.ok()) return Fail(r.status());
  PrintSummary(*r);
  return 0;
}

void AddCommon(CLI::App* cmd, Args& a) {
  cmd->add_option("config", a.config, "pipeline config (YAML)")->required();
  cmd->add_flag("--force", a.force, "re-run every enabled stage, ignoring the manifest");
  cmd->add_flag("-q,--quiet", a.quiet, "no progress lines on stderr");
}

}  // namespace

Action AddPipeline(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("pipeline", "Run the GenAI pipeline from a YAML config (prepare → quantize → compile → infer → eval)");
  cmd->require_subcommand(1);
  CLI::App* run = cmd->add_subcommand("run", "run the stages (reusing finished ones)");
  AddCommon(run, *a);
  run->add_option("--only", a->only, "run just this stage (upstream stages must be finished)");
  run->add_option("--from", a->from, "re-run this stage and everything after it");
  return [a]() { return RunPipeline(*a, std::nullopt); };
}

namespace {
Action AddStageCommand(CLI::App& app, const char* name, const char* help, pipeline::StageId stage) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(name, help);
  AddCommon(cmd, *a);
  return [a, stage]() { return RunPipeline(*a, stage); };
}
}  // namespace

Action AddPrepare(CLI::App& app) {
  return AddStageCommand(app, "prepare", "pipeline stage model_preparation only, from a config", pipeline::StageId::kModelPreparation);
}
Action AddQuantize(CLI::App& app) {
  return AddStageCommand(app, "quantize", "pipeline stage quantization only, from a config (model_preparation must be finished)",
                         pipeline::StageId::kQuantization);
}
Action AddInfer(CLI::App& app) {
  return AddStageCommand(app, "infer", "pipeline stage inference only, from a config (compilation must be finished)",
                         pipeline::StageId::kInference);
}

}  // namespace slm::cli
