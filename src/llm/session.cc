#include "llm/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace slm::llm {

Result<TailPolicy> ParseTailPolicy(const std::string& name) {
  if (name == "pad") return TailPolicy::kPad;
  if (name == "decode") return TailPolicy::kDecode;
  return InvalidArgument("tail policy '" + name + "' is not one of: pad, decode");
}

// One loaded method with its own input/output buffers, bound once.
struct Session::MethodSlot {
  io::MethodInfo info;
  std::unique_ptr<runtime::Method> method;
  bool selected = false;
  Buffer ids, pos, logits_row, logits;
  std::vector<Buffer> masks;  // per cache group, [1, T, L_g + T]
};

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const runtime::Program> program,
                                                 SessionOptions options) {
  std::unique_ptr<Session> s(new Session());
  SLM_RETURN_IF_ERROR(s->Init(std::move(program), options));
  return s;
}

Status Session::Init(std::shared_ptr<const runtime::Program> program, SessionOptions options) {
  program_ = std::move(program);
  options_ = options;
  alloc_ = options.allocator ? options.allocator : &DefaultAllocator();
  const std::string file = program_->artifact().path();
  SLM_ASSIGN_OR_RETURN(meta_, io::ContractMetadata::FromJson(program_->artifact().metadata_json()));
  auto bad = [&](const std::string& what) { return InvalidArgument(file + ": " + what); };
  if (meta_.contract != "hf_static") return Unsupported(file + ": metadata.contract '" + meta_.contract + "' is not implemented (this runner implements hf_static v1)");
  if (meta_.version != 1) return Unsupported(file + ": metadata.version " + std::to_string(meta_.version) + " of contract hf_static is not implemented (supported: 1)");
  if (meta_.max_context_len < 1) return bad("metadata.max_context_len must be >= 1");
  if (meta_.vocab_size < 1) return bad("metadata.vocab_size must be >= 1");
  if (meta_.cache_dtype != "float32") return Unsupported(file + ": metadata.cache.dtype '" + meta_.cache_dtype + "' is not supported (supported: float32)");
  std::set<std::string> group_names;
  for (const io::CacheGroup& g : meta_.groups) {
    if (!group_names.insert(g.name).second) return bad("metadata.cache.groups: duplicate group '" + g.name + "'");
    if (g.cache_len < 1 || g.window < 0) return bad("metadata.cache.groups '" + g.name + "': cache_len must be >= 1 and window >= 0");
  }
  for (size_t i = 0; i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    if (!meta_.FindGroup(l.group)) return bad("metadata.cache.layers[" + std::to_string(i) + "].group '" + l.group + "' is not a declared group");
    if (l.n_kv_heads < 1 || l.head_dim < 1) return bad("metadata.cache.layers[" + std::to_string(i) + "]: n_kv_heads and head_dim must be >= 1");
  }

  // Caches: one [1, Hkv, L, hd] pair per layer, shared by every method.
  for (const io::CacheLayer& l : meta_.layers) {
    const io::CacheGroup* g = meta_.FindGroup(l.group);
    SLM_ASSIGN_OR_RETURN(uint64_t bytes, CheckedByteSize(DType::kF32, {1, l.n_kv_heads, g->cache_len, l.head_dim}));
    k_caches_.push_back(Buffer::Allocate(bytes, *alloc_));
    v_caches_.push_back(Buffer::Allocate(bytes, *alloc_));
  }

  std::set<std::string> method_names;
  for (const io::MethodInfo& mi : meta_.methods) {
    if (!method_names.insert(mi.name).second) return bad("metadata.methods: duplicate method '" + mi.name + "'");
    auto slot = std::make_unique<MethodSlot>();
    slot->info = mi;
    auto method = program_->LoadMethod(mi.name, *alloc_);
    if (!method.ok()) {
      if (method.status().code() == ErrorCode::kNotFound) return NotFound(file + ": metadata.methods lists '" + mi.name + "' but the program has no such method");
      return method.status();
    }
    slot->method = std::move(method).value();
    if (mi.role == "decode") {
      if (mi.step != 1) return bad("metadata.methods '" + mi.name + "': decode step must be 1, found " + std::to_string(mi.step));
      if (decode_) return bad("metadata.methods: more than one decode method");
    } else if (mi.role == "prefill") {
      if (mi.step < 2) return bad("metadata.methods '" + mi.name + "': prefill step must be > 1, found " + std::to_string(mi.step));
    } else {
      return bad("metadata.methods '" + mi.name + "': unknown role '" + mi.role + "'");
    }
    if (mi.logits_mode != "selected" && mi.logits_mode != "all") return bad("metadata.methods '" + mi.name + "': unknown logits_mode '" + mi.logits_mode + "'");
    slot->selected = mi.logits_mode == "selected";
    SLM_RETURN_IF_ERROR(ValidateMethod(*slot));
    if (mi.role == "decode") decode_ = std::move(slot);
    else prefill_.push_back(std::move(slot));
  }
  if (!decode_) return bad("metadata.methods: no method with role 'decode'");
  std::sort(prefill_.begin(), prefill_.end(), [](const auto& a, const auto& b) { return a->info.step > b->info.step; });
  return Status::Ok();
}

// Checks a method's signature against the metadata (exact geometry) and binds every buffer.
Status Session::ValidateMethod(MethodSlot& slot) {
  runtime::Method& m = *slot.method;
  const std::string where = program_->artifact().path() + ": method '" + slot.info.name + "'";
  const int64_t T = slot.info.step;
  size_t expected_inputs = 0;
  auto expect = [&](const std::string& name, DType dtype, const Shape& shape, bool output = false) -> Result<const runtime::TensorSpec*> {
    const runtime::TensorSpec* s = output ? m.FindOutput(name) : m.FindInput(name);
    if (!s) return InvalidArgument(where + ": missing " + (output ? "output" : "input") + " '" + name + "'");
    if (s->dtype != dtype || s->shape != shape) {
      return InvalidArgument(where + ": " + name + " is " + DTypeName(s->dtype) + " " + ShapeToString(s->shape) +
                             ", metadata requires " + DTypeName(dtype) + " " + ShapeToString(shape));
    }
    if (!output) ++expected_inputs;
    return s;
  };
  // input_ids first: its shape carries the step, checked separately for a clearer error.
  const runtime::TensorSpec* ids = m.FindInput("input_ids");
  if (ids && ids->shape.size() == 2 && ids->shape[1] != T) {
    return InvalidArgument(where + ": metadata step " + std::to_string(T) + " disagrees with input_ids " + ShapeToString(ids->shape));
  }
  SLM_RETURN_IF_ERROR(expect("input_ids", DType::kI32, {1, T}).status());
  SLM_RETURN_IF_ERROR(expect("input_pos", DType::kI32, {1, T}).status());
  for (const io::CacheGroup& g : meta_.groups) {
    SLM_RETURN_IF_ERROR(expect("attn_mask." + g.name, DType::kF32, {1, T, g.cache_len + T}).status());
  }
  if (slot.selected) SLM_RETURN_IF_ERROR(expect("logits_row", DType::kI32, {1}).status());
  for (size_t i = 0; i < meta_.layers.size(); ++i) {
    const io::CacheLayer& l = meta_.layers[i];
    const Shape cs = {1, l.n_kv_heads, meta_.FindGroup(l.group)->cache_len, l.head_dim};
    SLM_RETURN_IF_ERROR(expect("k_cache." + std::to_string(i), DType::kF32, cs).status());
    SLM_RETURN_IF_ERROR(expect("v_cache." + std::to_string(i), DType::kF32, cs).status());
  }
  if (m.inputs().size() != expected_inputs) {
    return InvalidArgument(where + ": has " + std::to_string(m.inputs().size()) + " inputs, metadata accounts for " +
                           std::to_string(expected_inputs) + " (layer or group counts disagree)");
  }
  const int64_t rows = slot.selected ? 1 : T;
  SLM_RETURN_IF_ERROR(expect(meta_.logits_output, DType::kF32, {1, rows, meta_.vocab_size}, true).status());
  if (m.outputs().size() != 1) return InvalidArgument(where + ": has " + std::to_string(m.outputs().size()) + " outputs, expected 1 (" + meta_.logits_output + ")");

  // Buffers, from the session's allocator, bound once for the session's lifetime.
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
  for (size_t i = 0; i < meta_.layers.size(); ++i) {
    SLM_RETURN_IF_ERROR(m.BindInput("k_cache." + std::to_string(i), k_caches_[i].data(), k_caches_[i].size()));
    SLM_RETURN_IF_ERROR(m.BindInput("v_cache." + std::to_string(i), v_caches_[i].data(), v_caches_[i].size()));
  }
  return m.BindOutput(meta_.logits_output, slot.logits.data(), slot.logits.size());
}

Status Session::CheckCapacity(int64_t n) const {
  if (poisoned_) return FailedPrecondition("session is poisoned by an earlier error; call Reset()");
  if (n < 0) return InvalidArgument("negative token count");
  if (pos_ + n > meta_.max_context_len) {
    return OutOfRange("request of " + std::to_string(n) + " tokens at position " + std::to_string(pos_) +
                      " exceeds the context of " + std::to_string(meta_.max_context_len) + " tokens (" +
                      std::to_string(meta_.max_context_len - pos_) + " left)");
  }
  return Status::Ok();
}

// Mask for a group of length L and window W (0 = unlimited), per the contract: cache column s
// is visible to a valid row at position p iff slot s holds a committed position q < pos_ and
// p - q < W; new column k iff k <= t, k is valid and p - pos_k < W. A padding row sees only its
// own column.
void Session::BuildMask(const io::CacheGroup& g, int64_t T, int64_t n_valid, float* mask) const {
  const float kHidden = -std::numeric_limits<float>::infinity();
  const int64_t L = g.cache_len, W = g.window;
  const int64_t cols = L + T;
  std::fill(mask, mask + T * cols, kHidden);
  for (int64_t t = 0; t < T; ++t) {
    float* row = mask + t * cols;
    if (t >= n_valid) {
      row[L + t] = 0.0f;
      continue;
    }
    const int64_t p = pos_ + t;
    // Committed positions live in [max(0, pos_ - L), pos_); each in slot q mod L.
    int64_t first = std::max<int64_t>(0, pos_ - L);
    if (W > 0) first = std::max(first, p - W + 1);
    for (int64_t q = first; q < pos_; ++q) row[q % L] = 0.0f;
    for (int64_t k = 0; k <= t; ++k) {
      if (W == 0 || t - k < W) row[L + k] = 0.0f;
    }
  }
}

Status Session::RunChunk(MethodSlot& slot, std::span<const int32_t> tokens, std::span<float> last_logits) {
  const int64_t T = slot.info.step;
  const int64_t n = static_cast<int64_t>(tokens.size());
  int32_t* ids = slot.ids.as<int32_t>();
  int32_t* pos = slot.pos.as<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    ids[t] = t < n ? tokens[t] : meta_.pad_id;
    pos[t] = t < n ? static_cast<int32_t>(pos_ + t) : -1;
  }
  for (size_t gi = 0; gi < meta_.groups.size(); ++gi) {
    BuildMask(meta_.groups[gi], T, n, slot.masks[gi].as<float>());
  }
  if (slot.selected) *slot.logits_row.as<int32_t>() = static_cast<int32_t>(n - 1);
  Status st = slot.method->Execute();
  if (!st.ok()) {
    poisoned_ = true;
    return st;
  }
  pos_ += n;
  const int64_t row = slot.selected ? 0 : n - 1;
  const float* src = slot.logits.as<float>() + row * meta_.vocab_size;
  std::copy_n(src, meta_.vocab_size, last_logits.data());
  return Status::Ok();
}

Status Session::Feed(std::span<const int32_t> tokens, std::span<float> last_logits, FeedReport* report) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  SLM_RETURN_IF_ERROR(CheckCapacity(n));
  if (n == 0) return InvalidArgument("Feed needs at least one token");
  if (static_cast<int64_t>(last_logits.size()) != meta_.vocab_size) {
    return InvalidArgument("logits buffer holds " + std::to_string(last_logits.size()) + " floats, vocab is " + std::to_string(meta_.vocab_size));
  }
  FeedReport local;
  FeedReport& r = report ? *report : local;
  int64_t done = 0;
  while (done < n) {
    const int64_t left = n - done;
    MethodSlot* slot = nullptr;
    for (auto& p : prefill_) {  // largest step that fits
      if (p->info.step <= left) { slot = p.get(); break; }
    }
    if (!slot && left > 1 && !prefill_.empty() && options_.tail_policy == TailPolicy::kPad) {
      slot = prefill_.back().get();  // smallest step, padded
    }
    if (!slot) slot = decode_.get();
    const int64_t take = std::min(left, slot->info.step);
    SLM_RETURN_IF_ERROR(RunChunk(*slot, tokens.subspan(done, take), last_logits));
    (slot == decode_.get() ? r.decode_calls : r.prefill_calls)++;
    r.rows_computed += slot->info.step;
    done += take;
  }
  return Status::Ok();
}

Status Session::FeedDecodeOnly(std::span<const int32_t> tokens, std::span<float> last_logits,
                               std::vector<float>* all_logits) {
  SLM_RETURN_IF_ERROR(CheckCapacity(static_cast<int64_t>(tokens.size())));
  if (static_cast<int64_t>(last_logits.size()) != meta_.vocab_size) return InvalidArgument("logits buffer size differs from vocab");
  if (all_logits) all_logits->clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    SLM_RETURN_IF_ERROR(RunChunk(*decode_, tokens.subspan(i, 1), last_logits));
    if (all_logits) all_logits->insert(all_logits->end(), last_logits.begin(), last_logits.end());
  }
  return Status::Ok();
}

void Session::Reset(bool clear) {
  pos_ = 0;
  poisoned_ = false;
  if (clear) {
    for (Buffer& b : k_caches_) std::memset(b.data(), 0, b.size());
    for (Buffer& b : v_caches_) std::memset(b.data(), 0, b.size());
  }
}

}  // namespace slm::llm
