// The generate loop: prompt → Session::Feed → sample → decode, with EOS stops, a token budget,
// streaming of complete UTF-8 text, and stats. One runner core for every hf_static artifact.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "llm/sampler.h"
#include "llm/session.h"
#include "llm/stats.h"
#include "llm/tokenizer.h"
#include "runtime/program.h"

namespace slm::llm {

struct RunnerOptions {
  SessionOptions session;
};

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  bool stop_on_eos = true;
  // Called with each complete UTF-8 chunk of generated text, as soon as it is complete.
  std::function<void(std::string_view)> on_text;
  // Keep the full logits row of every step (the prompt's last row, then one per decode).
  bool keep_logits = false;
  // Prefix reuse (multi-turn chat): `prompt` is the whole sequence from position 0; the part
  // shared with the session's history keeps its cache rows and only the rest is prefilled
  // (stats.prefill_tokens_computed counts those). Off: `prompt` continues the session.
  bool reuse_prefix = false;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated;
  std::string text;                       // decoded generated text
  std::string stop_reason;                // "eos" | "max_tokens" | "context_full"
  std::vector<std::vector<float>> logits; // when keep_logits: logits[k] produced generated[k]
  GenerationStats stats;
};

class Runner {
 public:
  static Result<std::unique_ptr<Runner>> Load(const std::string& artifact_path,
                                              RunnerOptions options = {});
  Session& session() { return *session_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }  // null if none embedded
  const io::ContractMetadata& metadata() const { return session_->metadata(); }
  double load_ms() const { return load_ms_; }

  // Text → ids, adding BOS when the metadata says so.
  Result<std::vector<int32_t>> Encode(std::string_view text) const;
  // Generates after the session's current state (call session().Reset() for a fresh start), or,
  // with options.reuse_prefix, from position 0 reusing the cached prefix shared with `prompt`.
  // Afterwards the session holds the prompt and every generated token but the last (which was
  // sampled, not fed): a follow-up turn that starts with them reuses all of it but that token.
  Result<GenerateResult> Generate(std::span<const int32_t> prompt, const GenerateOptions& options);

 private:
  Runner() = default;
  std::shared_ptr<runtime::Program> program_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Tokenizer> tokenizer_;
  double load_ms_ = 0;
};

}  // namespace slm::llm
