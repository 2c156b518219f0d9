// Session: the runner's view of an artifact's I/O contract — an IOManager. It owns the KV caches
// and every I/O buffer of the methods it calls and drives them by the contract's rules (chunked
// prefill with a padded or decoded tail, absolute positions, masks, a capacity check free of
// side effects, reset), plus what goes beyond the contract's floor: token history, prefix reuse,
// rewind, fork, snapshot/restore.
//
// Session::Create picks the implementation registered for the artifact's (contract, version)
// (see io_manager.h; hf_static v1 lives in hf_static_v1.cc). One runner core drives them all.
//
// Failure semantics:
//  - A request refused by the capacity check (or by argument checks) changes nothing: the next
//    request behaves exactly as if the refused one never happened.
//  - An error in the middle of a request (a method failing to execute) poisons the session:
//    every later request fails with FailedPrecondition until Reset() (or a successful
//    LoadSnapshot(), which replaces the whole state).
//  - Every state and I/O buffer comes from SessionOptions.allocator and lives as long as the
//    session; the allocator must outlive the session (and its forks). An allocator that refuses
//    a buffer (returns null) makes Create/Fork fail with ResourceExhausted, every buffer already
//    obtained freed, the forked session untouched (tests/llm/session_fault_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "io/contract_metadata.h"
#include "runtime/program.h"

namespace slm::llm {

// What a prompt tail shorter than the smallest prefill step goes through:
//   kPad    one call of the smallest prefill method, padded (a single token goes to decode);
//   kDecode one decode call per token;
//   kAuto   the cheaper of the two by the per-call costs measured when the session was created.
enum class TailPolicy { kPad, kDecode, kAuto };
Result<TailPolicy> ParseTailPolicy(const std::string& name);  // "pad" | "decode" | "auto"
const char* TailPolicyName(TailPolicy p);

struct SessionOptions {
  TailPolicy tail_policy = TailPolicy::kPad;
  Allocator* allocator = nullptr;  // every state and I/O buffer comes from here; null → default
  // Per-call cost in ms by method name, for kAuto. Empty: measured at creation by timing one
  // all-padding call of each method (no state changes). Set it for reproducible choices.
  std::map<std::string, double> method_cost_ms;
};

// What one Feed() call did, for stats and tests.
struct FeedReport {
  int64_t prefill_calls = 0;
  int64_t decode_calls = 0;
  int64_t rows_computed = 0;    // including padding rows
  int64_t tokens_computed = 0;  // valid tokens run through a method
  int64_t tokens_reused = 0;    // prompt tokens whose cache rows were kept (prefix reuse)
};

class Session {
 public:
  // Picks the IOManager registered for the artifact's (contract, version); an unknown pair is
  // an Unsupported error naming both. Validates the artifact against its metadata strictly.
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const runtime::Program> program,
                                                 SessionOptions options = {});
  virtual ~Session() = default;

  virtual const io::ContractMetadata& metadata() const = 0;
  virtual const SessionOptions& options() const = 0;
  // Committed tokens since the last reset, in order (history().size() == pos()).
  virtual std::span<const int32_t> history() const = 0;
  int64_t pos() const { return static_cast<int64_t>(history().size()); }
  int64_t max_context_len() const { return metadata().max_context_len; }
  int64_t vocab_size() const { return metadata().vocab_size; }
  virtual bool poisoned() const = 0;
  // Per-call costs used by TailPolicy::kAuto (empty unless the policy is kAuto).
  virtual const std::map<std::string, double>& method_cost_ms() const = 0;

  // Would `n` more tokens fit? Touches no state.
  virtual Status CheckCapacity(int64_t n) const = 0;

  // Commits `tokens` at positions pos()..pos()+n-1 (largest prefill steps that fit, the tail by
  // the tail policy) and writes the logits of the last token into `last_logits` [vocab].
  // Refused without side effects if they do not fit.
  virtual Status Feed(std::span<const int32_t> tokens, std::span<float> last_logits,
                      FeedReport* report = nullptr) = 0;
  // Feeds tokens one at a time through decode only (the reference path for conformance).
  // `all_logits`, if non-null, receives [n, vocab].
  virtual Status FeedDecodeOnly(std::span<const int32_t> tokens, std::span<float> last_logits,
                                std::vector<float>* all_logits = nullptr) = 0;
  // Prefix reuse: `tokens` is a whole sequence from position 0 (e.g. a chat conversation so
  // far). The longest prefix shared with history() keeps its cache rows (the session rewinds to
  // it); only the rest is computed. At least the last token is always computed, since its
  // logits are returned. When the cache cannot rewind far enough (a wrapped ring), the session
  // resets and computes everything. report->tokens_reused says how many were kept.
  Status FeedWithPrefixReuse(std::span<const int32_t> tokens, std::span<float> last_logits,
                             FeedReport* report = nullptr);

  // pos = 0 and history cleared. Cache contents need not be cleared (masks hide them); `clear`
  // zeroes them. Clears poisoning. Loaded methods stay loaded.
  virtual void Reset(bool clear = false) = 0;
  // Drops the last `n` committed tokens (pos -= n). Possible when no cache row of a kept
  // position was overwritten: always for full caches (cache_len >= max_context_len, including
  // full-length sliding mode); for a ring group only while pos <= cache_len. Otherwise
  // FailedPrecondition naming the group, and nothing changes.
  virtual Status Rewind(int64_t n) = 0;
  // Whether Rewind(n) would succeed (no side effects).
  virtual Status CanRewind(int64_t n) const = 0;

  // A copy of this session (caches, position, history, options, allocator); shares the loaded
  // program. The copy and the original evolve independently.
  virtual Result<std::unique_ptr<Session>> Fork() const = 0;
  // Writes the session's state (position, history, committed cache rows) to `path` atomically,
  // in the versioned, checksummed format of docs/session-snapshot.md.
  virtual Status SaveSnapshot(const std::string& path) const = 0;
  // Replaces this session's state with a snapshot's, after checking its checksum and that its
  // geometry matches the loaded artifact exactly. On error nothing changes.
  virtual Status LoadSnapshot(const std::string& path) = 0;
};

}  // namespace slm::llm
