#include "llm/runner.h"

#include <algorithm>

#include "llm/tokenizer_factory.h"
#include "llm/utf8_stream.h"

namespace slm::llm {

Result<std::unique_ptr<Runner>> Runner::Load(const std::string& path, RunnerOptions options) {
  Stopwatch watch;
  std::unique_ptr<Runner> r(new Runner());
  SLM_ASSIGN_OR_RETURN(r->program_, runtime::Program::Load(path));
  SLM_ASSIGN_OR_RETURN(r->session_, Session::Create(r->program_, options.session));
  const io::ArtifactFile& a = r->program_->artifact();
  if (!a.tokenizer_kind().empty()) {
    // Every kind the compiler embeds (tokenizer_factory.h); unknown kinds are kUnsupported.
    SLM_ASSIGN_OR_RETURN(TokenizerBundle tok, LoadEmbeddedTokenizer(a.tokenizer_kind(), a.tokenizer_bytes(), path + " (embedded tokenizer)"));
    r->tokenizer_ = std::move(tok.tokenizer);
  }
  r->load_ms_ = watch.elapsed_ms();
  return r;
}

Result<std::vector<int32_t>> Runner::Encode(std::string_view text) const {
  if (!tokenizer_) return FailedPrecondition("the artifact has no embedded tokenizer; pass token ids instead");
  SLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(text));
  const io::ContractMetadata& m = session_->metadata();
  if (m.add_bos && m.bos_id) ids.insert(ids.begin(), *m.bos_id);
  return ids;
}

Result<GenerateResult> Runner::Generate(std::span<const int32_t> prompt, const GenerateOptions& opt) {
  const io::ContractMetadata& m = session_->metadata();
  GenerateResult res;
  res.prompt_ids.assign(prompt.begin(), prompt.end());
  if (prompt.empty()) return InvalidArgument("the prompt is empty");
  for (int32_t id : prompt) {
    if (id < 0 || id >= m.vocab_size) return InvalidArgument("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(m.vocab_size) + ")");
  }
  Sampler sampler(opt.sampling, static_cast<int32_t>(m.vocab_size));
  SLM_RETURN_IF_ERROR(sampler.Validate());
  if (opt.reuse_prefix) {
    if (session_->poisoned()) return FailedPrecondition("session is poisoned by an earlier error mid-request; call Reset()");
    if (static_cast<int64_t>(prompt.size()) > m.max_context_len) {
      return OutOfRange("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context of " +
                        std::to_string(m.max_context_len));
    }
  } else {
    SLM_RETURN_IF_ERROR(session_->CheckCapacity(static_cast<int64_t>(prompt.size())));
  }

  std::vector<float> logits(m.vocab_size);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  // Per-byte replacement matches SentencePiece's own decoding of invalid byte runs.
  Utf8StreamDecoder utf8(Utf8StreamDecoder::Replacement::kPerByte);
  auto emit = [&](const std::string& bytes) {
    std::string complete = utf8.Push(bytes);
    if (!complete.empty()) {
      res.text += complete;
      if (opt.on_text) opt.on_text(complete);
    }
  };

  res.stats.load_ms = load_ms_;
  res.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  Stopwatch total;
  FeedReport report;
  if (opt.reuse_prefix) {
    SLM_RETURN_IF_ERROR(session_->FeedWithPrefixReuse(prompt, logits, &report));
  } else {
    SLM_RETURN_IF_ERROR(session_->Feed(prompt, logits, &report));
  }
  res.stats.prefill_ms = total.elapsed_ms();
  res.stats.prefill_tokens_computed = report.tokens_computed;

  Stopwatch decode_watch;
  int32_t prev = prompt.back();
  res.stop_reason = "max_tokens";
  for (int64_t k = 0; k < opt.max_new_tokens; ++k) {
    if (opt.keep_logits) res.logits.push_back(logits);
    const int32_t next = sampler.Sample(logits.data(), history);
    if (k == 0) res.stats.ttft_ms = total.elapsed_ms();
    res.generated.push_back(next);
    history.push_back(next);
    const bool is_eos = std::find(m.eos_ids.begin(), m.eos_ids.end(), next) != m.eos_ids.end();
    if (opt.stop_on_eos && is_eos) {
      res.stop_reason = "eos";
      break;
    }
    if (tokenizer_) emit(tokenizer_->DecodeToken(prev, next));
    prev = next;
    if (k + 1 == opt.max_new_tokens) break;
    if (!session_->CheckCapacity(1).ok()) {
      res.stop_reason = "context_full";
      break;
    }
    if (k == 0) decode_watch = Stopwatch();
    SLM_RETURN_IF_ERROR(session_->Feed(std::span<const int32_t>(&next, 1), logits));
  }
  res.stats.decode_ms = res.generated.size() > 1 ? decode_watch.elapsed_ms() : 0.0;
  res.stats.generated_tokens = static_cast<int64_t>(res.generated.size());
  std::string tail = utf8.Flush();
  if (!tail.empty()) {
    res.text += tail;
    if (opt.on_text) opt.on_text(tail);
  }
  res.stats.peak_rss_bytes = PeakRssBytes();
  return res;
}

}  // namespace slm::llm
