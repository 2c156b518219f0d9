#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "llm/generation_defaults.h"
#include "llm/runner.h"
#include "tools/commands.h"

namespace slm::cli {
namespace {

Result<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return InvalidArgument("--prompt-ids: '" + item + "' is not an integer token id");
    }
  }
  return ids;
}

}  // namespace

Action AddRun(CLI::App& app) {
  struct Args {
    std::string model, prompt, prompt_ids, tail_policy = "pad";
    std::string save_session, load_session;
    std::optional<int64_t> n;
    std::optional<float> temp, top_p, min_p, repeat_penalty;
    std::optional<int32_t> top_k;
    uint64_t seed = 0;
    bool json = false, logits = false, ignore_eos = false;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a .slm artifact (text on stdout, stats on stderr)");
  cmd->add_option("model", a->model, "artifact (.slm)")->required();
  auto* p = cmd->add_option("-p,--prompt", a->prompt, "prompt text (BOS added as the artifact says)");
  auto* pi = cmd->add_option("--prompt-ids", a->prompt_ids, "prompt as comma-separated token ids, e.g. 1,5,9 (used as given)");
  p->excludes(pi);
  cmd->add_option("-n,--max-tokens", a->n, "tokens to generate (default: the artifact's generation_config max_new_tokens / max_length, else 128)");
  cmd->add_option("--temp", a->temp, "temperature (0 = greedy)");
  cmd->add_option("--top-k", a->top_k, "top-k (0 = off)");
  cmd->add_option("--top-p", a->top_p, "top-p (1 = off)");
  cmd->add_option("--min-p", a->min_p, "min-p (0 = off)");
  cmd->add_option("--repeat-penalty", a->repeat_penalty, "repetition penalty (1 = off)");
  cmd->add_option("--seed", a->seed, "sampling seed")->capture_default_str();
  cmd->add_option("--tail-policy", a->tail_policy, "prompt tail shorter than the smallest prefill step: pad | decode | auto (the cheaper by per-call costs timed at load)")->capture_default_str();
  cmd->add_flag("--ignore-eos", a->ignore_eos, "keep generating after EOS");
  cmd->add_option("-t,--threads", a->threads, "worker threads for the kernels (default: all cores)");
  cmd->add_option("--load-session", a->load_session, "restore a session snapshot first; the prompt continues it");
  cmd->add_option("--save-session", a->save_session, "write a session snapshot after generating (docs/session-snapshot.md)");
  cmd->add_flag("--json", a->json, "print one JSON object (prompt ids, generated ids, text, stats) instead of streaming");
  cmd->add_flag("--logits", a->logits, "with --json: include the full logits row of every step");
  return [a]() {
    auto policy = llm::ParseTailPolicy(a->tail_policy);
    if (!policy.ok()) return Fail(policy.status());
    ThreadPool::SetDefaultThreadCount(a->threads);  // before any method is loaded
    llm::RunnerOptions ro;
    ro.session.tail_policy = *policy;
    auto runner = llm::Runner::Load(a->model, ro);
    if (!runner.ok()) return Fail(runner.status());
    llm::Runner& r = **runner;
    if (!a->load_session.empty()) {
      Status st = r.session().LoadSnapshot(a->load_session);
      if (!st.ok()) return Fail(st);
    }

    std::vector<int32_t> prompt;
    if (!a->prompt_ids.empty()) {
      auto ids = ParseIds(a->prompt_ids);
      if (!ids.ok()) return Fail(ids.status());
      prompt = *ids;
    } else {
      auto ids = r.Encode(a->prompt);
      if (!ids.ok()) return Fail(ids.status());
      prompt = *ids;
    }
    if (prompt.empty()) return Fail(InvalidArgument("the prompt is empty: pass -p TEXT or --prompt-ids"));
    if (static_cast<int64_t>(prompt.size()) > r.session().max_context_len()) {
      return Fail(OutOfRange("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the artifact's context of " +
                             std::to_string(r.session().max_context_len()) + " tokens"));
    }

    // The artifact's generation_config.json gives the defaults (transformers' semantics);
    // every flag given on the command line overrides its key.
    auto defaults = llm::ParseGenerationDefaults(r.metadata().generation_defaults, a->model + ": metadata.generation_defaults");
    if (!defaults.ok()) return Fail(defaults.status());
    llm::GenerateOptions go;
    go.max_new_tokens = a->n ? *a->n : llm::DefaultMaxNewTokens(*defaults, static_cast<int64_t>(prompt.size()), 128);
    llm::ApplyGenerationDefaults(*defaults, &go.sampling);
    if (a->temp) go.sampling.temperature = *a->temp;
    if (a->top_k) go.sampling.top_k = *a->top_k;
    if (a->top_p) go.sampling.top_p = *a->top_p;
    if (a->min_p) go.sampling.min_p = *a->min_p;
    if (a->repeat_penalty) go.sampling.repetition_penalty = *a->repeat_penalty;
    go.sampling.seed = a->seed;
    go.stop_on_eos = !a->ignore_eos;
    go.keep_logits = a->json && a->logits;
    if (!a->json) {
      if (!a->prompt.empty()) { std::fputs(a->prompt.c_str(), stdout); }
      go.on_text = [](std::string_view s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
      };
    }
    auto res = r.Generate(prompt, go);
    if (!res.ok()) return Fail(res.status());
    if (!a->save_session.empty()) {
      Status st = r.session().SaveSnapshot(a->save_session);
      if (!st.ok()) return Fail(st);
    }
    if (a->json) {
      nlohmann::json j;
      j["prompt_ids"] = res->prompt_ids;
      j["generated_ids"] = res->generated;
      j["text"] = res->text;
      j["stop_reason"] = res->stop_reason;
      j["stats"] = res->stats.ToJson();
      if (a->logits) j["logits"] = res->logits;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("\n");
      std::fflush(stdout);  // the newline before the stats line on stderr
      std::fprintf(stderr, "%s\n", res->stats.ToText().c_str());
    }
    return 0;
  };
}

}  // namespace slm::cli
