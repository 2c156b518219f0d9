// The hf_static v1 IOManager: owns the KV caches and every I/O buffer of an artifact's methods,
// and drives them by the contract's rules — chunked prefill with a padded (or decoded) tail,
// absolute positions, per-group attention masks, a capacity check free of side effects, reset.
//
// Failure semantics: a request refused by the capacity check changes nothing. An error in the
// middle of a request (a method failing to execute) poisons the session: every later request
// fails with FailedPrecondition until Reset().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "io/contract_metadata.h"
#include "runtime/program.h"

namespace slm::llm {

enum class TailPolicy { kPad, kDecode };
Result<TailPolicy> ParseTailPolicy(const std::string& name);  // "pad" | "decode"

struct SessionOptions {
  TailPolicy tail_policy = TailPolicy::kPad;
  Allocator* allocator = nullptr;  // every state and I/O buffer comes from here; null → default
};

// What one Feed() call did, for stats and tests.
struct FeedReport {
  int64_t prefill_calls = 0;
  int64_t decode_calls = 0;
  int64_t rows_computed = 0;  // including padding rows
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const runtime::Program> program,
                                                 SessionOptions options = {});
  ~Session();

  const io::ContractMetadata& metadata() const { return meta_; }
  int64_t pos() const { return pos_; }
  int64_t max_context_len() const { return meta_.max_context_len; }
  int64_t vocab_size() const { return meta_.vocab_size; }
  bool poisoned() const { return poisoned_; }

  // Would `n` more tokens fit? Touches no state.
  Status CheckCapacity(int64_t n) const;

  // Commits `tokens` at positions pos()..pos()+n-1 (prefill methods for whole chunks, the tail
  // by the tail policy; a single token goes through decode) and writes the logits of the last
  // token into `last_logits` [vocab]. Refused without side effects if they do not fit.
  Status Feed(std::span<const int32_t> tokens, std::span<float> last_logits,
              FeedReport* report = nullptr);
  // Feeds tokens one at a time through decode only (the reference path for conformance).
  // `all_logits`, if non-null, receives [n, vocab].
  Status FeedDecodeOnly(std::span<const int32_t> tokens, std::span<float> last_logits,
                        std::vector<float>* all_logits = nullptr);

  // pos = 0. Cache contents need not be cleared (masks hide them); `clear` zeroes them.
  void Reset(bool clear = false);

 private:
  struct MethodSlot;
  Session() = default;
  Status Init(std::shared_ptr<const runtime::Program> program, SessionOptions options);
  // Checks a method's signature against the metadata (exact geometry), then binds its buffers.
  Status ValidateMethod(MethodSlot& slot);
  // One call of `slot` over tokens [0, n) (n <= step), padding the rest.
  Status RunChunk(MethodSlot& slot, std::span<const int32_t> tokens, std::span<float> last_logits);
  void BuildMask(const io::CacheGroup& group, int64_t step, int64_t n_valid, float* mask) const;

  std::shared_ptr<const runtime::Program> program_;
  io::ContractMetadata meta_;
  SessionOptions options_;
  Allocator* alloc_ = nullptr;
  std::vector<std::unique_ptr<MethodSlot>> prefill_;  // by step, descending
  std::unique_ptr<MethodSlot> decode_;
  std::vector<Buffer> k_caches_, v_caches_;
  int64_t pos_ = 0;
  bool poisoned_ = false;
};

}  // namespace slm::llm
