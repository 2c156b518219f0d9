#include "llm/evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>

#include "llm/sampler.h"
#include "llm/stats.h"
#include "runtime/program.h"

namespace slm::llm {
namespace {

// log softmax(row)[target], computed stably in double.
double LogProb(std::span<const float> row, int32_t target) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float v : row) mx = std::max(mx, static_cast<double>(v));
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  return static_cast<double>(row[target]) - mx - std::log(sum);
}

// Captures the last output of each layer (by value name "layers.<i>.…") during Execute.
class LayerCapture final : public runtime::OpObserver {
 public:
  // layer index → that layer's last output of this step
  std::map<int64_t, std::vector<float>> outputs;

  void OnOp(const runtime::Method& method, size_t index, const graph::Op& op, int64_t,
            int64_t) override {
    const std::vector<int64_t>& plan = PlanFor(method);
    if (index >= plan.size() || plan[index] < 0) return;
    const graph::Value& v = method.graph().values[op.outputs[0]];
    const auto* data = static_cast<const float*>(method.value_data(op.outputs[0]));
    if (data == nullptr || v.dtype != DType::kF32) return;
    const int64_t n = *CheckedNumElements(v.shape);
    outputs[plan[index]].assign(data, data + n);
  }

 private:
  // Per op index: the layer whose last output it produces, or -1.
  const std::vector<int64_t>& PlanFor(const runtime::Method& method) {
    auto it = plans_.find(&method);
    if (it != plans_.end()) return it->second;
    const graph::Graph& g = method.graph();
    std::vector<int64_t> plan(g.ops.size(), -1);
    std::map<int64_t, size_t> last;
    static const std::regex kLayer(R"(^layers\.(\d+)\.)");
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (g.ops[i].outputs.empty()) continue;
      std::smatch m;
      const std::string& name = g.values[g.ops[i].outputs[0]].name;
      if (std::regex_search(name, m, kLayer)) last[std::stoll(m[1].str())] = i;
    }
    for (auto [layer, i] : last) plan[i] = layer;
    return plans_.emplace(&method, std::move(plan)).first->second;
  }
  std::map<const runtime::Method*, std::vector<int64_t>> plans_;
};

}  // namespace

double SqnrDb(double signal_power, double noise_power) {
  if (noise_power <= 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal_power / noise_power);
}

Result<PerplexityResult> Perplexity(Session& session, std::span<const int32_t> all_tokens,
                                    const PerplexityOptions& options) {
  std::span<const int32_t> tokens = all_tokens;
  if (options.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > options.max_tokens) {
    tokens = tokens.first(static_cast<size_t>(options.max_tokens));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 2) return InvalidArgument("perplexity needs at least 2 tokens, got " + std::to_string(n));
  const int64_t window = options.window > 0 ? options.window : session.max_context_len();
  if (window < 2 || window > session.max_context_len()) {
    return InvalidArgument("perplexity window must be in [2, " + std::to_string(session.max_context_len()) +
                           "] (the artifact's context), got " + std::to_string(window));
  }
  const int64_t stride = options.stride > 0 ? options.stride : std::max<int64_t>(1, window / 2);
  if (stride > window) {
    return InvalidArgument("perplexity stride " + std::to_string(stride) + " exceeds the window of " +
                           std::to_string(window) + " tokens");
  }
  std::vector<float> row(static_cast<size_t>(session.vocab_size()));
  PerplexityResult r;
  Stopwatch sw;
  double nll = 0;
  int64_t prev_end = 0;
  for (int64_t begin = 0; begin < n; begin += stride) {
    const int64_t end = std::min(begin + window, n);
    const int64_t first_scored = std::max(prev_end, begin + 1);  // target positions [first_scored, end)
    session.Reset();
    for (int64_t j = begin; j < end - 1; ++j) {
      SLM_RETURN_IF_ERROR(session.FeedDecodeOnly(tokens.subspan(static_cast<size_t>(j), 1), row));
      ++r.tokens_fed;
      const int64_t target = j + 1;
      if (target < first_scored) continue;
      const int32_t id = tokens[static_cast<size_t>(target)];
      if (id < 0 || id >= static_cast<int32_t>(row.size())) {
        return OutOfRange("token id " + std::to_string(id) + " at position " + std::to_string(target) +
                          " is outside the vocabulary [0, " + std::to_string(row.size()) + ")");
      }
      nll -= LogProb(row, id);
      ++r.tokens_scored;
    }
    ++r.windows;
    prev_end = end;
    if (end == n) break;
  }
  session.Reset();
  r.ms = sw.elapsed_ms();
  r.mean_nll = r.tokens_scored > 0 ? nll / static_cast<double>(r.tokens_scored) : 0;
  r.perplexity = std::exp(r.mean_nll);
  r.tok_per_s = r.ms > 0 ? static_cast<double>(r.tokens_fed) / (r.ms / 1000.0) : 0;
  return r;
}

Result<LogitsComparison> CompareLogits(Session& candidate, Session& reference,
                                       std::span<const int32_t> tokens) {
  if (candidate.vocab_size() != reference.vocab_size()) {
    return InvalidArgument("cannot compare logits: candidate vocabulary " + std::to_string(candidate.vocab_size()) +
                           " != reference vocabulary " + std::to_string(reference.vocab_size()));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 1) return InvalidArgument("logits comparison needs at least 1 token");
  if (n > candidate.max_context_len() || n > reference.max_context_len()) {
    return OutOfRange("logits comparison over " + std::to_string(n) + " tokens exceeds a context of " +
                      std::to_string(std::min(candidate.max_context_len(), reference.max_context_len())));
  }
  const size_t V = static_cast<size_t>(candidate.vocab_size());
  std::vector<float> c_row(V), r_row(V);
  candidate.Reset();
  reference.Reset();
  LayerCapture c_cap, r_cap;
  double sig = 0, noise = 0, max_abs = 0;
  int64_t agree = 0;
  std::map<int64_t, std::pair<double, double>> layer_pow;  // layer → (signal, noise)
  for (int64_t t = 0; t < n; ++t) {
    auto tok = tokens.subspan(static_cast<size_t>(t), 1);
    {
      runtime::ScopedOpObserver obs(&c_cap);
      SLM_RETURN_IF_ERROR(candidate.FeedDecodeOnly(tok, c_row));
    }
    {
      runtime::ScopedOpObserver obs(&r_cap);
      SLM_RETURN_IF_ERROR(reference.FeedDecodeOnly(tok, r_row));
    }
    for (size_t i = 0; i < V; ++i) {
      const double d = static_cast<double>(c_row[i]) - r_row[i];
      sig += static_cast<double>(r_row[i]) * r_row[i];
      noise += d * d;
      max_abs = std::max(max_abs, std::abs(d));
    }
    agree += ArgMax(c_row) == ArgMax(r_row) ? 1 : 0;
    for (const auto& [layer, ref] : r_cap.outputs) {
      auto it = c_cap.outputs.find(layer);
      if (it == c_cap.outputs.end() || it->second.size() != ref.size()) continue;
      auto& [s, e] = layer_pow[layer];
      for (size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(it->second[i]) - ref[i];
        s += static_cast<double>(ref[i]) * ref[i];
        e += d * d;
      }
    }
  }
  candidate.Reset();
  reference.Reset();
  LogitsComparison out;
  out.tokens = n;
  out.logits_sqnr_db = SqnrDb(sig, noise);
  out.top1_agreement = static_cast<double>(agree) / static_cast<double>(n);
  out.max_abs_diff = max_abs;
  for (const auto& [layer, p] : layer_pow) {
    out.layers.push_back({"layers." + std::to_string(layer), SqnrDb(p.first, p.second)});
  }
  return out;
}

}  // namespace slm::llm
