#include "llm/hf_static_v1.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <set>

#include "core/memory_limit.h"
#include "llm/session_snapshot.h"
#include "llm/stats.h"

namespace slm::llm {
namespace {

// One loaded method with its own input/output buffers, bound once.
struct MethodSlot {
  io::MethodInfo info;
  std::unique_ptr<runtime::Method> method;
  bool selected = false;
  Buffer ids, pos, logits_row, logits;
  std::vector<Buffer> masks;  // per cache group, [1, T, L_g + T]
};

// Parses "<prefix><i>" with i a decimal int64 (no sign, no leading '+'); -1 when malformed or
// overflowing.
int64_t IndexAfter(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  int64_t v = -1;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || v < 0) return -1;
  return v;
}

class HfStaticV1Session final : public Session {
 public:
  Status Init(std::shared_ptr<const runtime::Program> program, const SessionOptions& options);

  const io::ContractMetadata& metadata() const override { return meta_; }
  const SessionOptions& options() const override { return options_; }
  std::span<const int32_t> history() const override { return history_; }
  bool poisoned() const override { return poisoned_; }
  const std::map<std::string, double>& method_cost_ms() const override { return costs_; }
  Status CheckCapacity(int64_t n) const override;
  Status Feed(std::span<const int32_t> tokens, std::span<float> last_logits, FeedReport* report) override;
  Status FeedDecodeOnly(std::span<const int32_t> tokens, std::span<float> last_logits,
                        std::vector<float>* all_logits) override;
  void Reset(bool clear) override;
  Status Rewind(int64_t n) override;
  Status CanRewind(int64_t n) const override;
  Result<std::unique_ptr<Session>> Fork() const override;
  Status SaveSnapshot(const std::string& path) const override;
  Status LoadSnapshot(const std::string& path) override;

 private:
  std::string File() const { return program_->artifact().path(); }
  Status ValidateMetadata();
  Status ValidateMethod(MethodSlot& slot);
  Status MeasureCosts();
  // One call of `slot` over tokens [0, n) (n <= step), padding the rest; n == 0 is an
  // all-padding call that commits nothing (used to measure costs).
  Status RunChunk(MethodSlot& slot, std::span<const int32_t> tokens, std::span<float> last_logits);
  void BuildMask(const io::CacheGroup& group, int64_t step, int64_t n_valid, float* mask) const;
  Status CheckTokens(std::span<const int32_t> tokens) const;

  std::shared_ptr<const runtime::Program> program_;
  io::ContractMetadata meta_;
  SessionOptions options_;
  Allocator* alloc_ = nullptr;
  std::vector<std::unique_ptr<MethodSlot>> prefill_;  // by step, descending
  std::unique_ptr<MethodSlot> decode_;
  std::vector<Buffer> k_caches_, v_caches_;  // per layer, [1, Hkv, L_g, hd] (f32 or int8)
  // Cache format kv_int8_tokenhead_v1: caches are int8 and each has f32 row scales [1, Hkv, L_g]
  // (the metadata's cache.extra_states "k_scale.<i>" / "v_scale.<i>"), per layer.
  bool q8_ = false;
  std::vector<Buffer> k_scales_, v_scales_;
  // The buffer of a cache state ("k_cache.3", "v_scale.0", ...), or nullptr.
  Buffer* StateBuffer(const std::string& name);
  std::vector<int32_t> history_;             // committed tokens; pos = size
  std::map<std::string, double> costs_;
  bool poisoned_ = false;
};

// Init, with an allocator that refuses a buffer (Buffer::Allocate throws std::bad_alloc) turned
// into an error: the half-built session is destroyed by the caller, freeing every buffer it got.
Status InitOrRefuse(HfStaticV1Session& s, std::shared_ptr<const runtime::Program> program,
                    const SessionOptions& options, const char* what) {
  try {
    return s.Init(std::move(program), options);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(std::string(what) + ": the session's allocator refused a state, I/O or method buffer");
  }
}

Status HfStaticV1Session::Init(std::shared_ptr<const runtime::Program> program, const SessionOptions& options) {
  program_ = std::move(program);
  options_ = options;
  alloc_ = options.allocator ? options.allocator : &DefaultAllocator();
  SLM_ASSIGN_OR_RETURN(meta_, io::ContractMetadata::FromJson(program_->artifact().metadata_json()));
  SLM_RETURN_IF_ERROR(ValidateMetadata());

  // Caches: one [1, Hkv, L, hd] pair per layer, shared by every method. Their sizes (and the
  // history's) come from the file: all must fit the memory limit before any is allocated.
  uint64_t state_bytes = 0;
  bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(meta_.max_context_len), sizeof(int32_t), &state_bytes);
  const DType cache_dt = q8_ ? DType::kI8 : DType::kF32;
  for (const io::CacheLayer& l : meta_.layers) {
    const io::CacheGroup* g = meta_.FindGroup(l.group);
    SLM_ASSIGN_OR_RETURN(uint64_t bytes, CheckedByteSize(cache_dt, {1, l.n_kv_heads, g->cache_len, l.head_dim}));
    overflow |= !AddBytes(&state_bytes, bytes) || !AddBytes(&state_bytes, bytes);
  }
  for (const io::CacheExtraState& e : meta_.cache_extra_states) {
    SLM_ASSIGN_OR_RETURN(uint64_t bytes, CheckedByteSize(DType::kF32, e.shape));
    overflow |= !AddBytes(&state_bytes, bytes);
  }
  SLM_RETURN_IF_ERROR(CheckMemoryNeed(overflow ? UINT64_MAX : state_bytes,
                                      program_->artifact().path() + ": the session's KV caches and history (metadata.cache)"));
  for (const io::CacheLayer& l : meta_.layers) {
    const io::CacheGroup* g = meta_.FindGroup(l.group);
    SLM_ASSIGN_OR_RETURN(uint64_t bytes, CheckedByteSize(cache_dt, {1, l.n_kv_heads, g->cache_len, l.head_dim}));
    k_caches_.push_back(Buffer::Allocate(bytes, *alloc_));
    v_caches_.push_back(Buffer::Allocate(bytes, *alloc_));
  }
  // Extra states (int8 row scales) through the same allocator, zeroed like the caches.
  for (const io::CacheExtraState& e : meta_.cache_extra_states) {
    SLM_ASSIGN_OR_RETURN(uint64_t bytes, CheckedByteSize(DType::kF32, e.shape));
    (e.name[0] == 'k' ? k_scales_ : v_scales_).push_back(Buffer::Allocate(bytes, *alloc_));
  }
  history_.reserve(static_cast<size_t>(meta_.max_context_len));

  for (const io::MethodInfo& mi : meta_.methods) {
    auto slot = std::make_unique<MethodSlot>();
    slot->info = mi;
    auto method = program_->LoadMethod(mi.name, *alloc_);
    if (!method.ok()) {
      if (method.status().code() == ErrorCode::kNotFound) {
        return NotFound(File() + ": metadata.methods lists '" + mi.name + "' but the program has no such method");
      }
      return method.status();
    }
    slot->method = std::move(method).value();
    slot->selected = mi.logits_mode == "selected";
    SLM_RETURN_IF_ERROR(ValidateMethod(*slot));
    if (mi.role == "decode") decode_ = std::move(slot);
    else prefill_.push_back(std::move(slot));
  }
  std::sort(prefill_.begin(), prefill_.end(), [](const auto& a, const auto& b) { return a->info.step > b->info.step; });
  if (options_.tail_policy == TailPolicy::kAuto) {
    if (!options_.method_cost_ms.empty()) {
      for (const auto& m : meta_.methods) {
        auto it = options_.method_cost_ms.find(m.name);
        if (it == options_.method_cost_ms.end() || !(it->second >= 0)) {
          return InvalidArgument("SessionOptions.method_cost_ms has no non-negative cost for method '" + m.name + "'");
        }
      }
      costs_ = options_.method_cost_ms;
    } else {
      SLM_RETURN_IF_ERROR(MeasureCosts());
    }
  }
  return Status::Ok();
}

// Every metadata rule that does not need the program (docs/hf-static-v1.md, "rejects").
Status HfStaticV1Session::ValidateMetadata() {
  const std::string file = File();
  auto bad = [&](const std::string& what) { return InvalidArgument(file + ": " + what); };
  if (meta_.contract != kHfStaticContract || meta_.version != kHfStaticV1Version) {
    return Unsupported(file + ": metadata.contract '" + meta_.contract + "' metadata.version " + std::to_string(meta_.version) +
                       " is not hf_static v1");
  }
  if (meta_.max_context_len < 1) return bad("metadata.max_context_len must be >= 1, found " + std::to_string(meta_.max_context_len));
  if (meta_.max_context_len > INT32_MAX) return bad("metadata.max_context_len " + std::to_string(meta_.max_context_len) + " overflows the int32 input_pos");
  if (meta_.vocab_size < 1) return bad("metadata.vocab_size must be >= 1, found " + std::to_string(meta_.vocab_size));
  auto in_vocab = [&](int64_t id) { return id >= 0 && id < meta_.vocab_size; };
  if (meta_.pad_id && !in_vocab(*meta_.pad_id)) return bad("metadata.pad_id " + std::to_string(*meta_.pad_id) + " is outside the vocabulary [0, " + std::to_string(meta_.vocab_size) + ")");
  if (meta_.bos_id && !in_vocab(*meta_.bos_id)) return bad("metadata.bos_id " + std::to_string(*meta_.bos_id) + " is outside the vocabulary");
  for (size_t i = 0; i < meta_.eos_ids.size(); ++i) {
    if (!in_vocab(meta_.eos_ids[i])) return bad("metadata.eos_ids[" + std::to_string(i) + "] " + std::to_string(meta_.eos_ids[i]) + " is outside the vocabulary");
  }
  const std::string format = meta_.cache_format.empty() ? io::kCacheFormatF32 : meta_.cache_format;
  if (format != io::kCacheFormatF32 && format != io::kCacheFormatInt8) {
    return Unsupported(file + ": metadata.cache.format '" + format + "' is not supported (supported: " + io::kCacheFormatF32 + ", " +
                       io::kCacheFormatInt8 + ")");
  }
  q8_ = format == io::kCacheFormatInt8;
  const char* want_dtype = q8_ ? "int8" : "float32";
  if (meta_.cache_dtype != want_dtype) {
    return Unsupported(file + ": metadata.cache.dtype '" + meta_.cache_dtype + "' is not supported by metadata.cache.format '" + format +
                       "' (expected " + want_dtype + ")");
  }
  if (!q8_ && !meta_.cache_extra_states.empty()) {
    return bad("metadata.cache.extra_states has " + std::to_string(meta_.cache_extra_states.size()) + " entries, cache format " + format +
               " has none");
  }
  if (meta_.groups.empty()) return bad("metadata.cache.groups is empty");
  std::set<std::string> group_names;
  for (size_t i = 0; i < meta_.groups.size(); ++i) {
    const io::CacheGroup& g = meta_.groups[i];
    const std::string f = "metadata.cache.groups[" + std::to_string(i) + "]";
    if (g.name.empty()) return bad(f + ".name is empty");
    if (!group_names.insert(g.name).second) return bad(f + ".name: duplicate group '" + g.name + "'");
    if (g.cache_len < 1) return bad(f + ".cache_len must be >= 1, found " + std::to_string(g.cache_len));
    if (g.cache_len > meta_.max_context_len) {
      return bad(f + ".cache_len " + std::to_string(g.cache_len) + " exceeds max_context_len " + std::to_string(meta_.max_context_len));
    }
    if (g.window < 0) return bad(f + ".window must be >= 0, found " + std::to_string(g.window));
    // A ring shorter than its window (or an unlimited window) would lose rows still visible.
    if (g.cache_len < meta_.max_context_len && (g.window == 0 || g.cache_len < g.window)) {
      return bad(f + ": cache_len " + std::to_string(g.cache_len) + " < max_context_len needs a window <= cache_len, found window " +
                 std::to_string(g.window));
    }
  }
  if (meta_.layers.empty()) return bad("metadata.cache.layers is empty");
  std::set<std::string> used_groups;
  for (size_t i = 0; i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    const std::string f = "metadata.cache.layers[" + std::to_string(i) + "]";
    if (!meta_.FindGroup(l.group)) return bad(f + ".group '" + l.group + "' is not a declared group");
    used_groups.insert(l.group);
    if (l.n_kv_heads < 1) return bad(f + ".n_kv_heads must be >= 1, found " + std::to_string(l.n_kv_heads));
    if (l.head_dim < 1) return bad(f + ".head_dim must be >= 1, found " + std::to_string(l.head_dim));
  }
  for (const io::CacheGroup& g : meta_.groups) {
    if (!used_groups.count(g.name)) return bad("metadata.cache.groups: group '" + g.name + "' is used by no layer (group and layer counts disagree)");
  }
  if (q8_) {
    // Exactly the row scales of every cache, in order (k then v per layer), exact geometry.
    const size_t want = 2 * meta_.layers.size();
    if (meta_.cache_extra_states.size() != want) {
      return bad("metadata.cache.extra_states has " + std::to_string(meta_.cache_extra_states.size()) + " entries, cache format " + format +
                 " needs " + std::to_string(want) + " (k_scale.<i> and v_scale.<i> per layer)");
    }
    for (size_t j = 0; j < want; ++j) {
      const io::CacheExtraState& e = meta_.cache_extra_states[j];
      const int64_t i = static_cast<int64_t>(j / 2);
      const char kv = j % 2 == 0 ? 'k' : 'v';
      const io::CacheLayer& l = meta_.layers[static_cast<size_t>(i)];
      const Shape shape = {1, l.n_kv_heads, meta_.FindGroup(l.group)->cache_len};
      const std::string f = "metadata.cache.extra_states[" + std::to_string(j) + "]";
      const std::string name = io::KvScaleStateName(kv, i), of = std::string(1, kv) + "_cache." + std::to_string(i);
      if (e.name != name) return bad(f + ".name is '" + e.name + "', expected '" + name + "'");
      if (e.scales != of) return bad(f + ".scales is '" + e.scales + "', expected '" + of + "'");
      if (e.dtype != "float32") return bad(f + ".dtype is '" + e.dtype + "', expected 'float32'");
      if (e.shape != shape) return bad(f + ".shape is " + ShapeToString(e.shape) + ", expected " + ShapeToString(shape) + " ([1, n_kv_heads, cache_len])");
    }
  }
  auto nl = meta_.model.find("num_layers");
  if (nl != meta_.model.end() && nl->is_number_integer() && nl->get<int64_t>() != static_cast<int64_t>(meta_.layers.size())) {
    return bad("metadata.cache.layers has " + std::to_string(meta_.layers.size()) + " entries, metadata.model.num_layers says " +
               std::to_string(nl->get<int64_t>()));
  }
  if (meta_.logits_output.empty()) return bad("metadata.logits.output is empty");

  if (meta_.methods.empty()) return bad("metadata.methods is empty");
  std::set<std::string> method_names;
  std::set<int64_t> prefill_steps;
  int decodes = 0;
  for (size_t i = 0; i < meta_.methods.size(); ++i) {
    const io::MethodInfo& mi = meta_.methods[i];
    const std::string f = "metadata.methods[" + std::to_string(i) + "]";
    if (mi.name.empty()) return bad(f + ".name is empty");
    if (!method_names.insert(mi.name).second) return bad(f + ".name: duplicate method '" + mi.name + "'");
    if (mi.role == "decode") {
      if (mi.step != 1) return bad(f + " ('" + mi.name + "'): decode step must be 1, found " + std::to_string(mi.step));
      if (++decodes > 1) return bad(f + " ('" + mi.name + "'): more than one method with role 'decode'");
    } else if (mi.role == "prefill") {
      if (mi.step < 2) return bad(f + " ('" + mi.name + "'): prefill step must be > 1, found " + std::to_string(mi.step));
      if (mi.step > meta_.max_context_len) {
        return bad(f + " ('" + mi.name + "'): step " + std::to_string(mi.step) + " exceeds max_context_len " + std::to_string(meta_.max_context_len));
      }
      if (!prefill_steps.insert(mi.step).second) return bad(f + " ('" + mi.name + "'): duplicate prefill step " + std::to_string(mi.step));
    } else {
      return bad(f + ".role '" + mi.role + "' is not one of: prefill, decode");
    }
    if (mi.logits_mode != "selected" && mi.logits_mode != "all") {
      return bad(f + ".logits_mode '" + mi.logits_mode + "' is not one of: selected, all");
    }
  }
  if (decodes == 0) return bad("metadata.methods: no method with role 'decode'");

  std::set<std::string> so_outputs, so_binds;
  for (size_t i = 0; i < meta_.state_outputs.size(); ++i) {
    const io::StateOutput& s = meta_.state_outputs[i];
    const std::string f = "metadata.state_outputs[" + std::to_string(i) + "]";
    if (s.output.empty() || s.output == meta_.logits_output) return bad(f + ".output '" + s.output + "' is empty or names the logits output");
    if (!so_outputs.insert(s.output).second) return bad(f + ".output: duplicate output '" + s.output + "'");
    if (!so_binds.insert(s.binds).second) return bad(f + ".binds: state '" + s.binds + "' is bound by two outputs");
    int64_t li = IndexAfter(s.binds, "k_cache.");
    if (li < 0) li = IndexAfter(s.binds, "v_cache.");
    if (li < 0 && q8_) li = IndexAfter(s.binds, "k_scale.");
    if (li < 0 && q8_) li = IndexAfter(s.binds, "v_scale.");
    if (li < 0 || li >= static_cast<int64_t>(meta_.layers.size())) {
      return bad(f + ".binds '" + s.binds + "' is not a cache state of this artifact (k_cache.<i> / v_cache.<i>" +
                 (q8_ ? " / k_scale.<i> / v_scale.<i>" : "") + ", i < " + std::to_string(meta_.layers.size()) + ")");
    }
  }
  return Status::Ok();
}

Buffer* HfStaticV1Session::StateBuffer(const std::string& name) {
  const int64_t i = IndexAfter(name, name.substr(0, std::min<size_t>(name.size(), 8)));
  if (i < 0) return nullptr;
  const std::string base = name.substr(0, 8);
  std::vector<Buffer>* v = base == "k_cache." ? &k_caches_ : base == "v_cache." ? &v_caches_
                         : base == "k_scale." ? &k_scales_ : base == "v_scale." ? &v_scales_ : nullptr;
  if (!v || i >= static_cast<int64_t>(v->size())) return nullptr;
  return &(*v)[static_cast<size_t>(i)];
}

// Checks a method's signature against the metadata (exact geometry) and binds every buffer.
Status HfStaticV1Session::ValidateMethod(MethodSlot& slot) {
  runtime::Method& m = *slot.method;
  const std::string where = File() + ": method '" + slot.info.name + "'";
  const int64_t T = slot.info.step;
  const int64_t n_layers = static_cast<int64_t>(meta_.layers.size());

  // Names first: duplicates, then names the metadata does not account for.
  std::set<std::string> seen;
  for (const runtime::TensorSpec& s : m.inputs()) {
    if (!seen.insert(s.name).second) return InvalidArgument(where + ": duplicate input name '" + s.name + "'");
  }
  for (const runtime::TensorSpec& s : m.outputs()) {
    if (!seen.insert(s.name).second) return InvalidArgument(where + ": duplicate output name '" + s.name + "'");
  }
  for (const runtime::TensorSpec& s : m.inputs()) {
    if (s.name == "input_ids" || s.name == "input_pos" || (s.name == "logits_row" && slot.selected)) continue;
    if (s.name.rfind("attn_mask.", 0) == 0) {
      if (!meta_.FindGroup(s.name.substr(10))) {
        return InvalidArgument(where + ": input '" + s.name + "' names a cache group the metadata does not declare (metadata.cache.groups has " +
                               std::to_string(meta_.groups.size()) + "; group counts disagree)");
      }
      continue;
    }
    const bool is_k = s.name.rfind("k_cache.", 0) == 0, is_v = s.name.rfind("v_cache.", 0) == 0;
    const bool is_ks = q8_ && s.name.rfind("k_scale.", 0) == 0, is_vs = q8_ && s.name.rfind("v_scale.", 0) == 0;
    if (is_k || is_v || is_ks || is_vs) {
      const int64_t i = IndexAfter(s.name, s.name.substr(0, 8));
      if (i < 0 || i >= n_layers) {
        return InvalidArgument(where + ": input '" + s.name + "' overflows metadata.cache.layers (" + std::to_string(n_layers) +
                               " layers; layer counts disagree)");
      }
      if (s.kind != graph::ValueKind::kState) return InvalidArgument(where + ": input '" + s.name + "' must be a state (mutable cache)");
      continue;
    }
    return InvalidArgument(where + ": input '" + s.name + "' is not part of hf_static v1" +
                           (s.name == "logits_row" ? " for a method whose metadata logits_mode is 'all'" : ""));
  }

  auto expect = [&](const std::string& name, DType dtype, const Shape& shape, bool output) -> Status {
    const runtime::TensorSpec* s = output ? m.FindOutput(name) : m.FindInput(name);
    if (!s) return InvalidArgument(where + ": missing " + (output ? "output" : "input") + " '" + name + "' required by the metadata");
    if (s->dtype != dtype || s->shape != shape) {
      return InvalidArgument(where + ": " + (output ? "output" : "input") + " '" + name + "' is " + DTypeName(s->dtype) + " " +
                             ShapeToString(s->shape) + ", metadata requires " + DTypeName(dtype) + " " + ShapeToString(shape));
    }
    return Status::Ok();
  };
  // input_ids first: its shape carries the step, checked separately for a clearer error.
  const runtime::TensorSpec* ids = m.FindInput("input_ids");
  if (ids && ids->shape.size() == 2 && ids->shape[1] != T) {
    return InvalidArgument(where + ": metadata step " + std::to_string(T) + " disagrees with input_ids " + ShapeToString(ids->shape));
  }
  SLM_RETURN_IF_ERROR(expect("input_ids", DType::kI32, {1, T}, false));
  SLM_RETURN_IF_ERROR(expect("input_pos", DType::kI32, {1, T}, false));
  for (const io::CacheGroup& g : meta_.groups) {
    SLM_RETURN_IF_ERROR(expect("attn_mask." + g.name, DType::kF32, {1, T, g.cache_len + T}, false));
  }
  if (slot.selected) SLM_RETURN_IF_ERROR(expect("logits_row", DType::kI32, {1}, false));
  std::vector<Shape> cache_shapes;
  for (int64_t i = 0; i < n_layers; ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    cache_shapes.push_back({1, l.n_kv_heads, meta_.FindGroup(l.group)->cache_len, l.head_dim});
    const DType cd = q8_ ? DType::kI8 : DType::kF32;
    SLM_RETURN_IF_ERROR(expect("k_cache." + std::to_string(i), cd, cache_shapes.back(), false));
    SLM_RETURN_IF_ERROR(expect("v_cache." + std::to_string(i), cd, cache_shapes.back(), false));
  }
  const int64_t rows = slot.selected ? 1 : T;
  SLM_RETURN_IF_ERROR(expect(meta_.logits_output, DType::kF32, {1, rows, meta_.vocab_size}, true));
  // State outputs: exact geometry of the state they alias.
  for (const io::StateOutput& so : meta_.state_outputs) {
    const runtime::TensorSpec* state = m.FindInput(so.binds);
    SLM_RETURN_IF_ERROR(expect(so.output, state->dtype, state->shape, true));
  }
  for (const runtime::TensorSpec& s : m.outputs()) {
    bool known = s.name == meta_.logits_output;
    for (const io::StateOutput& so : meta_.state_outputs) known |= so.output == s.name;
    if (!known) {
      return InvalidArgument(where + ": output '" + s.name + "' is neither metadata.logits.output nor listed in metadata.state_outputs");
    }
  }

  // Buffers, from the session's allocator, bound once for the session's lifetime. Their sizes
  // are the program's declared input/output sizes (each checked by CheckedByteSize): their sum
  // must fit the memory limit before any is allocated.
  uint64_t io_bytes = 0;
  bool io_overflow = false;
  for (const runtime::TensorSpec& s : m.inputs()) {
    if (s.kind == graph::ValueKind::kInput) io_overflow |= !AddBytes(&io_bytes, s.nbytes);
  }
  for (const runtime::TensorSpec& s : m.outputs()) {
    if (s.name == meta_.logits_output) io_overflow |= !AddBytes(&io_bytes, s.nbytes);
  }
  SLM_RETURN_IF_ERROR(CheckMemoryNeed(io_overflow ? UINT64_MAX : io_bytes, where + ": input and logits buffers"));
  slot.ids = Buffer::Allocate(T * sizeof(int32_t), *alloc_);
  slot.pos = Buffer::Allocate(T * sizeof(int32_t), *alloc_);
  slot.logits = Buffer::Allocate(rows * meta_.vocab_size * sizeof(float), *alloc_);
  SLM_RETURN_IF_ERROR(m.BindInput("input_ids", slot.ids.data(), slot.ids.size()));
  SLM_RETURN_IF_ERROR(m.BindInput("input_pos", slot.pos.data(), slot.pos.size()));
  for (const io::CacheGroup& g : meta_.groups) {
    slot.masks.push_back(Buffer::Allocate(T * (g.cache_len + T) * sizeof(float), *alloc_));
    SLM_RETURN_IF_ERROR(m.BindInput("attn_mask." + g.name, slot.masks.back().data(), slot.masks.back().size()));
  }
  if (slot.selected) {
    slot.logits_row = Buffer::Allocate(sizeof(int32_t), *alloc_);
    SLM_RETURN_IF_ERROR(m.BindInput("logits_row", slot.logits_row.data(), slot.logits_row.size()));
  }
  for (int64_t i = 0; i < n_layers; ++i) {
    SLM_RETURN_IF_ERROR(m.BindInput("k_cache." + std::to_string(i), k_caches_[i].data(), k_caches_[i].size()));
    SLM_RETURN_IF_ERROR(m.BindInput("v_cache." + std::to_string(i), v_caches_[i].data(), v_caches_[i].size()));
  }
  for (const io::CacheExtraState& e : meta_.cache_extra_states) {
    SLM_RETURN_IF_ERROR(expect(e.name, DType::kF32, e.shape, false));
    Buffer* b = StateBuffer(e.name);
    SLM_RETURN_IF_ERROR(m.BindInput(e.name, b->data(), b->size()));
  }
  // A state output is the same buffer as its state: an alias, never a copy.
  for (const io::StateOutput& so : meta_.state_outputs) {
    Buffer* b = StateBuffer(so.binds);
    SLM_RETURN_IF_ERROR(m.BindOutput(so.output, b->data(), b->size()));
  }
  return m.BindOutput(meta_.logits_output, slot.logits.data(), slot.logits.size());
}

// Times one all-padding call of each method (after one untimed warm-up call): padding rows are
// never committed, so this changes no state.
Status HfStaticV1Session::MeasureCosts() {
  std::vector<float> sink(meta_.vocab_size);
  auto measure = [&](MethodSlot& slot) -> Status {
    for (int rep = 0; rep < 2; ++rep) {
      Stopwatch w;
      SLM_RETURN_IF_ERROR(RunChunk(slot, {}, sink));
      costs_[slot.info.name] = w.elapsed_ms();
    }
    return Status::Ok();
  };
  for (auto& p : prefill_) SLM_RETURN_IF_ERROR(measure(*p));
  return measure(*decode_);
}

Status HfStaticV1Session::CheckCapacity(int64_t n) const {
  if (poisoned_) return FailedPrecondition("session is poisoned by an earlier error mid-request; call Reset()");
  if (n < 0) return InvalidArgument("negative token count " + std::to_string(n));
  if (pos() + n > meta_.max_context_len) {
    return OutOfRange("request of " + std::to_string(n) + " tokens at position " + std::to_string(pos()) +
                      " exceeds the context of " + std::to_string(meta_.max_context_len) + " tokens (" +
                      std::to_string(meta_.max_context_len - pos()) + " left)");
  }
  return Status::Ok();
}

Status HfStaticV1Session::CheckTokens(std::span<const int32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= meta_.vocab_size) {
      return InvalidArgument("token " + std::to_string(i) + " = " + std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                             std::to_string(meta_.vocab_size) + ")");
    }
  }
  return Status::Ok();
}

// Mask for a group of length L and window W (0 = unlimited), per the contract: cache column s
// is visible to a valid row at position p iff slot s holds a committed position q < pos and
// p - q < W; new column k iff k <= t, k is valid and p - pos_k < W. A padding row sees only its
// own column.
void HfStaticV1Session::BuildMask(const io::CacheGroup& g, int64_t T, int64_t n_valid, float* mask) const {
  const float kHidden = -std::numeric_limits<float>::infinity();
  const int64_t L = g.cache_len, W = g.window;
  const int64_t cols = L + T;
  const int64_t pos0 = pos();
  std::fill(mask, mask + T * cols, kHidden);
  for (int64_t t = 0; t < T; ++t) {
    float* row = mask + t * cols;
    if (t >= n_valid) {
      row[L + t] = 0.0f;
      continue;
    }
    const int64_t p = pos0 + t;
    // Committed positions live in [max(0, pos - L), pos); each in slot q mod L.
    int64_t first = std::max<int64_t>(0, pos0 - L);
    if (W > 0) first = std::max(first, p - W + 1);
    for (int64_t q = first; q < pos0; ++q) row[q % L] = 0.0f;
    for (int64_t k = 0; k <= t; ++k) {
      if (W == 0 || t - k < W) row[L + k] = 0.0f;
    }
  }
}

Status HfStaticV1Session::RunChunk(MethodSlot& slot, std::span<const int32_t> tokens, std::span<float> last_logits) {
  const int64_t T = slot.info.step;
  const int64_t n = static_cast<int64_t>(tokens.size());
  int32_t* ids = slot.ids.as<int32_t>();
  int32_t* pos = slot.pos.as<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    ids[t] = t < n ? tokens[t] : meta_.PaddingId();
    pos[t] = t < n ? static_cast<int32_t>(this->pos() + t) : -1;
  }
  for (size_t gi = 0; gi < meta_.groups.size(); ++gi) {
    BuildMask(meta_.groups[gi], T, n, slot.masks[gi].as<float>());
  }
  if (slot.selected) *slot.logits_row.as<int32_t>() = static_cast<int32_t>(std::max<int64_t>(n - 1, 0));
  Status st = slot.method->Execute();
  if (!st.ok()) {
    poisoned_ = true;
    return Status(st.code(), "method '" + slot.info.name + "' failed mid-request (the session is poisoned until Reset()): " + st.message());
  }
  if (n == 0) return Status::Ok();
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  const int64_t row = slot.selected ? 0 : n - 1;
  const float* src = slot.logits.as<float>() + row * meta_.vocab_size;
  std::copy_n(src, meta_.vocab_size, last_logits.data());
  return Status::Ok();
}

Status HfStaticV1Session::Feed(std::span<const int32_t> tokens, std::span<float> last_logits, FeedReport* report) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  SLM_RETURN_IF_ERROR(CheckCapacity(n));
  if (n == 0) return InvalidArgument("Feed needs at least one token");
  if (static_cast<int64_t>(last_logits.size()) != meta_.vocab_size) {
    return InvalidArgument("logits buffer holds " + std::to_string(last_logits.size()) + " floats, vocab is " + std::to_string(meta_.vocab_size));
  }
  SLM_RETURN_IF_ERROR(CheckTokens(tokens));
  FeedReport local;
  FeedReport& r = report ? *report : local;
  int64_t done = 0;
  // The tail (shorter than the smallest prefill step) is routed once, by policy.
  enum class Tail { kUndecided, kPad, kDecode } tail = Tail::kUndecided;
  while (done < n) {
    const int64_t left = n - done;
    MethodSlot* slot = nullptr;
    for (auto& p : prefill_) {  // largest step that fits
      if (p->info.step <= left) { slot = p.get(); break; }
    }
    if (!slot && !prefill_.empty()) {
      if (tail == Tail::kUndecided) {
        MethodSlot* smallest = prefill_.back().get();
        switch (options_.tail_policy) {
          case TailPolicy::kPad: tail = left > 1 ? Tail::kPad : Tail::kDecode; break;
          case TailPolicy::kDecode: tail = Tail::kDecode; break;
          case TailPolicy::kAuto:
            tail = costs_.at(smallest->info.name) < static_cast<double>(left) * costs_.at(decode_->info.name) ? Tail::kPad : Tail::kDecode;
            break;
        }
      }
      if (tail == Tail::kPad) slot = prefill_.back().get();
    }
    if (!slot) slot = decode_.get();
    const int64_t take = std::min(left, slot->info.step);
    SLM_RETURN_IF_ERROR(RunChunk(*slot, tokens.subspan(done, take), last_logits));
    (slot == decode_.get() ? r.decode_calls : r.prefill_calls)++;
    r.rows_computed += slot->info.step;
    r.tokens_computed += take;
    done += take;
  }
  return Status::Ok();
}

Status HfStaticV1Session::FeedDecodeOnly(std::span<const int32_t> tokens, std::span<float> last_logits,
                                         std::vector<float>* all_logits) {
  SLM_RETURN_IF_ERROR(CheckCapacity(static_cast<int64_t>(tokens.size())));
  if (static_cast<int64_t>(last_logits.size()) != meta_.vocab_size) return InvalidArgument("logits buffer size differs from vocab");
  SLM_RETURN_IF_ERROR(CheckTokens(tokens));
  if (all_logits) all_logits->clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    SLM_RETURN_IF_ERROR(RunChunk(*decode_, tokens.subspan(i, 1), last_logits));
    if (all_logits) all_logits->insert(all_logits->end(), last_logits.begin(), last_logits.end());
  }
  return Status::Ok();
}

void HfStaticV1Session::Reset(bool clear) {
  history_.clear();
  poisoned_ = false;
  if (clear) {
    for (Buffer& b : k_caches_) std::memset(b.data(), 0, b.size());
    for (Buffer& b : v_caches_) std::memset(b.data(), 0, b.size());
    for (Buffer& b : k_scales_) std::memset(b.data(), 0, b.size());
    for (Buffer& b : v_scales_) std::memset(b.data(), 0, b.size());
  }
}

Status HfStaticV1Session::CanRewind(int64_t n) const {
  if (poisoned_) return FailedPrecondition("session is poisoned by an earlier error mid-request; call Reset()");
  if (n < 0 || n > pos()) return OutOfRange("rewind of " + std::to_string(n) + " tokens: the session holds " + std::to_string(pos()));
  if (n == 0) return Status::Ok();
  // A ring overwrote the rows of positions pos - L.. once pos > L: the kept positions' rows may
  // be gone (see docs/hf-static-v1.md, "Rewind").
  for (const io::CacheGroup& g : meta_.groups) {
    if (g.cache_len < meta_.max_context_len && pos() > g.cache_len) {
      return FailedPrecondition("cannot rewind: cache group '" + g.name + "' is a ring of " + std::to_string(g.cache_len) +
                                " slots that has wrapped (pos " + std::to_string(pos()) +
                                "), so rows of the kept positions were overwritten; compile with full-length sliding caches to rewind");
    }
  }
  return Status::Ok();
}

Status HfStaticV1Session::Rewind(int64_t n) {
  SLM_RETURN_IF_ERROR(CanRewind(n));
  // Rows of the dropped positions stay in the cache; the masks hide every slot >= pos.
  history_.resize(history_.size() - static_cast<size_t>(n));
  return Status::Ok();
}

Result<std::unique_ptr<Session>> HfStaticV1Session::Fork() const {
  if (poisoned_) return FailedPrecondition("cannot fork a poisoned session; call Reset()");
  SessionOptions o = options_;
  if (o.tail_policy == TailPolicy::kAuto) o.method_cost_ms = costs_;  // no second measurement
  auto copy = std::make_unique<HfStaticV1Session>();
  SLM_RETURN_IF_ERROR(InitOrRefuse(*copy, program_, o, "fork"));
  copy->options_.method_cost_ms = options_.method_cost_ms;
  for (size_t i = 0; i < k_caches_.size(); ++i) {
    std::memcpy(copy->k_caches_[i].data(), k_caches_[i].data(), k_caches_[i].size());
    std::memcpy(copy->v_caches_[i].data(), v_caches_[i].data(), v_caches_[i].size());
  }
  for (size_t i = 0; i < k_scales_.size(); ++i) {
    std::memcpy(copy->k_scales_[i].data(), k_scales_[i].data(), k_scales_[i].size());
    std::memcpy(copy->v_scales_[i].data(), v_scales_[i].data(), v_scales_[i].size());
  }
  copy->history_ = history_;
  return std::unique_ptr<Session>(std::move(copy));
}

Status HfStaticV1Session::SaveSnapshot(const std::string& path) const {
  if (poisoned_) return FailedPrecondition("cannot snapshot a poisoned session; call Reset()");
  SessionSnapshot s;
  s.contract = meta_.contract;
  s.contract_version = meta_.version;
  s.max_context_len = meta_.max_context_len;
  s.vocab_size = meta_.vocab_size;
  s.cache_dtype = meta_.cache_dtype;
  s.groups = meta_.groups;
  s.layers = meta_.layers;
  s.cache_format = meta_.cache_format;
  s.history = history_;
  for (size_t i = 0; q8_ && i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    const int64_t L = meta_.FindGroup(l.group)->cache_len;
    const int64_t n = s.CommittedSlots(i);
    for (int kv = 0; kv < 2; ++kv) {
      const int8_t* src = (kv == 0 ? k_caches_[i] : v_caches_[i]).as<int8_t>();
      const float* sc = (kv == 0 ? k_scales_[i] : v_scales_[i]).as<float>();
      auto& dst = (kv == 0 ? s.k8 : s.v8).emplace_back();
      auto& dsc = (kv == 0 ? s.k_scale : s.v_scale).emplace_back();
      for (int64_t h = 0; h < l.n_kv_heads; ++h) {
        dst.insert(dst.end(), src + h * L * l.head_dim, src + (h * L + n) * l.head_dim);
        dsc.insert(dsc.end(), sc + h * L, sc + h * L + n);
      }
    }
  }
  for (size_t i = 0; !q8_ && i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    const int64_t L = meta_.FindGroup(l.group)->cache_len;
    const int64_t n = s.CommittedSlots(i);
    for (int kv = 0; kv < 2; ++kv) {
      const float* src = (kv == 0 ? k_caches_[i] : v_caches_[i]).as<float>();
      std::vector<float>& dst = (kv == 0 ? s.k : s.v).emplace_back();
      dst.reserve(l.n_kv_heads * n * l.head_dim);
      for (int64_t h = 0; h < l.n_kv_heads; ++h) {
        const float* head = src + h * L * l.head_dim;
        dst.insert(dst.end(), head, head + n * l.head_dim);
      }
    }
  }
  return WriteSessionSnapshot(path, s);
}

Status HfStaticV1Session::LoadSnapshot(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(SessionSnapshot s, ReadSessionSnapshot(path));
  SLM_RETURN_IF_ERROR(s.CheckGeometry(meta_, path));
  for (size_t i = 0; q8_ && i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    const int64_t L = meta_.FindGroup(l.group)->cache_len;
    const int64_t n = s.CommittedSlots(i);
    for (int kv = 0; kv < 2; ++kv) {
      int8_t* dst = (kv == 0 ? k_caches_[i] : v_caches_[i]).as<int8_t>();
      float* dsc = (kv == 0 ? k_scales_[i] : v_scales_[i]).as<float>();
      const auto& src = kv == 0 ? s.k8[i] : s.v8[i];
      const auto& ssc = kv == 0 ? s.k_scale[i] : s.v_scale[i];
      for (int64_t h = 0; h < l.n_kv_heads; ++h) {
        std::copy_n(src.data() + h * n * l.head_dim, n * l.head_dim, dst + h * L * l.head_dim);
        std::copy_n(ssc.data() + h * n, n, dsc + h * L);
      }
    }
  }
  for (size_t i = 0; !q8_ && i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    const int64_t L = meta_.FindGroup(l.group)->cache_len;
    const int64_t n = s.CommittedSlots(i);
    for (int kv = 0; kv < 2; ++kv) {
      float* dst = (kv == 0 ? k_caches_[i] : v_caches_[i]).as<float>();
      const std::vector<float>& src = kv == 0 ? s.k[i] : s.v[i];
      for (int64_t h = 0; h < l.n_kv_heads; ++h) {
        std::copy_n(src.data() + h * n * l.head_dim, n * l.head_dim, dst + h * L * l.head_dim);
      }
    }
  }
  history_ = std::move(s.history);
  poisoned_ = false;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Session>> CreateHfStaticV1Session(std::shared_ptr<const runtime::Program> program,
                                                         const SessionOptions& options) {
  if (!program) return InvalidArgument("hf_static v1: null program");
  auto s = std::make_unique<HfStaticV1Session>();
  SLM_RETURN_IF_ERROR(InitOrRefuse(*s, std::move(program), options, "session creation"));
  return std::unique_ptr<Session>(std::move(s));
}

}  // namespace slm::llm
