// `staticlm eval model.slm --text FILE [--stride N] [--max-tokens N] [--reference ref.slm]`:
// perplexity over a text file and, with --reference, SQNR / top-1 agreement of the logits
// against a reference artifact (teacher-forced on the text's tokens). Also accepts a pipeline
// config (.yaml/.yml): then runs the pipeline's evaluation stage only.
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "llm/evaluation.h"
#include "llm/runner.h"
#include "pipeline/pipeline.h"
#include "tools/commands.h"

namespace slm::cli {

Action AddEval(CLI::App& app) {
  struct Args {
    std::string model, text, reference;
    int64_t stride = 0, max_tokens = 0, compare_tokens = 128;
    bool json = false, force = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "Perplexity over a text file, and SQNR / top-1 agreement against a reference artifact");
  cmd->add_option("model", a->model, "artifact (.slm), or a pipeline config (.yaml) to run its evaluation stage")->required();
  cmd->add_option("--text", a->text, "text file for perplexity");
  cmd->add_option("--stride", a->stride, "window stride in tokens (0 = half the context)")->capture_default_str();
  cmd->add_option("--max-tokens", a->max_tokens, "use only the first N tokens of the text (0 = all)")->capture_default_str();
  cmd->add_option("--reference", a->reference, "reference artifact (e.g. the unquantized one) for SQNR / top-1 agreement");
  cmd->add_option("--compare-tokens", a->compare_tokens, "tokens of the text compared against the reference")->capture_default_str();
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_flag("--force", a->force, "with a config: re-run the evaluation stage");
  return [a]() {
    const std::string& m = a->model;
    if (m.size() > 5 && (m.ends_with(".yaml") || m.ends_with(".yml"))) {
      auto p = pipeline::Pipeline::FromYamlFile(m);
      if (!p.ok()) return Fail(p.status());
      pipeline::RunOptions ro;
      ro.only = pipeline::StageId::kEvaluation;
      ro.force = a->force;
      auto r = (*p)->Run(ro);
      if (!r.ok()) return Fail(r.status());
      std::printf("%s\n", r->report.value("evaluation", nlohmann::json::object()).dump(1).c_str());
      return 0;
    }
    if (a->text.empty()) return Fail(InvalidArgument("eval: --text FILE is required with an artifact"));
    auto runner = llm::Runner::Load(m);
    if (!runner.ok()) return Fail(runner.status());
    auto text = ReadFileToString(a->text);
    if (!text.ok()) return Fail(text.status());
    auto ids = (*runner)->Encode(*text);
    if (!ids.ok()) return Fail(ids.status());
    llm::PerplexityOptions po;
    po.stride = a->stride;
    po.max_tokens = a->max_tokens;
    auto ppl = llm::Perplexity((*runner)->session(), *ids, po);
    if (!ppl.ok()) return Fail(ppl.status());
    nlohmann::json j = {{"perplexity", ppl->perplexity}, {"mean_nll", ppl->mean_nll}, {"tokens_scored", ppl->tokens_scored},
                        {"windows", ppl->windows}, {"ms", ppl->ms}, {"tok_per_s", ppl->tok_per_s}};
    std::string text_out = "perplexity " + std::to_string(ppl->perplexity) + " over " + std::to_string(ppl->tokens_scored) +
                           " tokens (" + std::to_string(ppl->windows) + " windows, " + std::to_string(static_cast<int>(ppl->tok_per_s)) + " tok/s)";
    if (!a->reference.empty()) {
      auto ref = llm::Runner::Load(a->reference);
      if (!ref.ok()) return Fail(ref.status());
      int64_t n = std::min<int64_t>({static_cast<int64_t>(ids->size()), a->compare_tokens, (*runner)->session().max_context_len(),
                                     (*ref)->session().max_context_len()});
      auto cmp = llm::CompareLogits((*runner)->session(), (*ref)->session(), std::span<const int32_t>(*ids).first(static_cast<size_t>(n)));
      if (!cmp.ok()) return Fail(cmp.status());
      auto db = [](double v) { return std::isinf(v) ? nlohmann::json("inf") : nlohmann::json(v); };
      nlohmann::json layers = nlohmann::json::array();
      for (const auto& l : cmp->layers) layers.push_back({{"layer", l.layer}, {"sqnr_db", db(l.sqnr_db)}});
      j["comparison"] = {{"tokens", cmp->tokens}, {"logits_sqnr_db", db(cmp->logits_sqnr_db)},
                         {"top1_agreement", cmp->top1_agreement}, {"max_abs_diff", cmp->max_abs_diff}, {"layers", layers}};
      char b[160];
      std::snprintf(b, sizeof(b), "\nlogits SQNR %s dB, top-1 agreement %.1f%% over %lld tokens",
                    std::isinf(cmp->logits_sqnr_db) ? "inf" : std::to_string(cmp->logits_sqnr_db).c_str(),
                    100 * cmp->top1_agreement, static_cast<long long>(cmp->tokens));
      text_out += b;
      for (const auto& l : cmp->layers) {
        text_out += "\n  " + l.layer + " SQNR " + (std::isinf(l.sqnr_db) ? std::string("inf") : std::to_string(l.sqnr_db)) + " dB";
      }
    }
    std::printf("%s\n", a->json ? j.dump().c_str() : text_out.c_str());
    return 0;
  };
}

}  // namespace slm::cli
