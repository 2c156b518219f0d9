#include "llm/session.h"

#include <algorithm>

namespace slm::llm {

Result<TailPolicy> ParseTailPolicy(const std::string& name) {
  if (name == "pad") return TailPolicy::kPad;
  if (name == "decode") return TailPolicy::kDecode;
  if (name == "auto") return TailPolicy::kAuto;
  return InvalidArgument("tail policy '" + name + "' is not one of: pad, decode, auto");
}

const char* TailPolicyName(TailPolicy p) {
  switch (p) {
    case TailPolicy::kPad: return "pad";
    case TailPolicy::kDecode: return "decode";
    case TailPolicy::kAuto: return "auto";
  }
  return "unknown";
}

Status Session::FeedWithPrefixReuse(std::span<const int32_t> tokens, std::span<float> last_logits,
                                    FeedReport* report) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgument("FeedWithPrefixReuse needs at least one token");
  if (poisoned()) return FailedPrecondition("session is poisoned by an earlier error mid-request; call Reset()");
  // Capacity of the whole sequence from position 0, checked before anything changes.
  if (n > max_context_len()) {
    return OutOfRange("request of " + std::to_string(n) + " tokens exceeds the context of " +
                      std::to_string(max_context_len()) + " tokens");
  }
  if (static_cast<int64_t>(last_logits.size()) != vocab_size()) {
    return InvalidArgument("logits buffer holds " + std::to_string(last_logits.size()) + " floats, vocab is " + std::to_string(vocab_size()));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size()) {
      return InvalidArgument("token " + std::to_string(i) + " = " + std::to_string(tokens[i]) + " is outside the vocabulary");
    }
  }
  std::span<const int32_t> h = history();
  int64_t keep = std::mismatch(h.begin(), h.end(), tokens.begin(), tokens.end()).first - h.begin();
  keep = std::min(keep, n - 1);  // the last token is always computed: its logits are returned
  FeedReport local;
  FeedReport& r = report ? *report : local;
  if (keep < pos()) {
    if (CanRewind(pos() - keep).ok()) {
      SLM_RETURN_IF_ERROR(Rewind(pos() - keep));
    } else {
      Reset();  // a wrapped ring cannot rewind: recompute from scratch
      keep = 0;
    }
  }
  r.tokens_reused = keep;
  return Feed(tokens.subspan(keep), last_logits, &r);
}

}  // namespace slm::llm
