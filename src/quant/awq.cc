#include "quant/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "quant/gptq.h"
#include "quant/hessian_factor.h"

namespace slm::quant {
namespace {

using graph::Graph;
using graph::Op;
using graph::OpKind;
using graph::Value;
using graph::ValueKind;

// Where a group's 1/s goes, as found in one graph. Equal in every graph or not applied.
struct FoldPlan {
  std::vector<std::string> weights;  // the group's weights, in op order
  std::string kind;                  // "rmsnorm" | "glu_up_rows" | "v_rows"
  std::string target, target_bias;   // constant names (bias: empty when none)
  bool add_one = false;              // rmsnorm applied as (1 + w)
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;  // v_rows
  bool operator==(const FoldPlan&) const = default;
};

struct Use {
  size_t op;
  size_t slot;
};

// The uses and producers of every value of one graph.
struct GraphIndex {
  std::vector<std::vector<Use>> uses;   // value id → (op, input slot)
  std::vector<int64_t> producer;        // value id → op index, -1 for none
  std::set<std::string> never_scaled;   // embedding tables and the lm_head's weight
  explicit GraphIndex(const Graph& g) : uses(g.values.size()), producer(g.values.size(), -1) {
    int64_t last_matmul = -1;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      for (size_t s = 0; s < op.inputs.size(); ++s) uses[size_t(op.inputs[s])].push_back({i, s});
      for (int32_t o : op.outputs) producer[size_t(o)] = int64_t(i);
      if (op.kind == OpKind::kMatMul) last_matmul = int64_t(i);
      if ((op.kind == OpKind::kEmbedding || op.kind == OpKind::kEmbeddingQ) && op.inputs.size() > 1) {
        never_scaled.insert(g.values[size_t(op.inputs[1])].name);
      }
    }
    if (last_matmul >= 0) never_scaled.insert(g.values[size_t(g.ops[size_t(last_matmul)].inputs[1])].name);
  }
  // A constant f32 value used exactly once in the graph, by op `op` at `slot`.
  bool OwnConstant(const Graph& g, int32_t id, size_t op, size_t slot) const {
    const Value& v = g.values[size_t(id)];
    return v.kind == ValueKind::kConstant && v.dtype == DType::kF32 && v.source && !never_scaled.count(v.name) &&
           uses[size_t(id)].size() == 1 && uses[size_t(id)][0].op == op && uses[size_t(id)][0].slot == slot;
  }
  bool OnlyUsedBy(int32_t id, const std::set<size_t>& ops) const {
    for (const Use& u : uses[size_t(id)]) {
      if (!ops.count(u.op)) return false;
    }
    return !uses[size_t(id)].empty();
  }
};

// The matmul producing `id` with its own (scalable) weight [rows, *] and optional bias, or -1.
int64_t OwnMatMulProducer(const Graph& g, const GraphIndex& ix, int32_t id, int64_t rows) {
  const int64_t p = ix.producer[size_t(id)];
  if (p < 0) return -1;
  const Op& op = g.ops[size_t(p)];
  if (op.kind != OpKind::kMatMul || op.inputs.size() < 2) return -1;
  const Value& w = g.values[size_t(op.inputs[1])];
  if (!ix.OwnConstant(g, op.inputs[1], size_t(p), 1) || w.shape.size() != 2 || w.shape[0] != rows) return -1;
  if (op.inputs.size() == 3 && !ix.OwnConstant(g, op.inputs[2], size_t(p), 2)) return -1;
  return p;
}

// The fold plan of the group whose weights are read by `ops` (all kMatMul on input x), or none.
std::optional<FoldPlan> PlanGroup(const Graph& g, const GraphIndex& ix, const std::vector<size_t>& ops) {
  FoldPlan plan;
  const int32_t x = g.ops[ops[0]].inputs[0];
  std::set<size_t> readers;
  for (size_t i : ops) {
    const Op& op = g.ops[i];
    if (op.inputs[0] != x || !ix.OwnConstant(g, op.inputs[1], i, 1)) return std::nullopt;
    plan.weights.push_back(g.values[size_t(op.inputs[1])].name);
    readers.insert(i);
  }
  if (!ix.OnlyUsedBy(x, readers)) return std::nullopt;
  const int64_t k = g.values[size_t(g.ops[ops[0]].inputs[1])].shape[1];
  const int64_t p = ix.producer[size_t(x)];
  if (p < 0) return std::nullopt;
  const Op& prod = g.ops[size_t(p)];
  auto target = [&](int64_t matmul) {
    const Op& m = g.ops[size_t(matmul)];
    plan.target = g.values[size_t(m.inputs[1])].name;
    if (m.inputs.size() == 3) plan.target_bias = g.values[size_t(m.inputs[2])].name;
  };
  switch (prod.kind) {
    case OpKind::kRmsNorm: {
      if (prod.inputs.size() < 2 || !ix.OwnConstant(g, prod.inputs[1], size_t(p), 1)) return std::nullopt;
      const Value& w = g.values[size_t(prod.inputs[1])];
      if (w.shape != Shape{k}) return std::nullopt;  // a per-head norm does not span the channels
      plan.kind = "rmsnorm";
      plan.target = w.name;
      plan.add_one = !prod.ints.empty() && prod.ints[0] == 1;
      return plan;
    }
    case OpKind::kSwiGlu:
    case OpKind::kGeGlu: {
      const int32_t up = prod.inputs[1];
      if (!ix.OnlyUsedBy(up, {size_t(p)}) || ix.uses[size_t(up)].size() != 1) return std::nullopt;
      const int64_t m = OwnMatMulProducer(g, ix, up, k);
      if (m < 0) return std::nullopt;
      plan.kind = "glu_up_rows";
      target(m);
      return plan;
    }
    case OpKind::kAttention:
    case OpKind::kAttentionQ8: {
      if (prod.ints.size() < 3) return std::nullopt;
      plan.n_heads = prod.ints[0];
      plan.n_kv_heads = prod.ints[1];
      plan.head_dim = prod.ints[2];
      if (plan.n_kv_heads <= 0 || plan.n_heads % plan.n_kv_heads != 0 || plan.n_heads * plan.head_dim != k) {
        return std::nullopt;
      }
      // v (f32): read by attention and the cache commit, or by its int8 quantizer whose rows
      // feed only int8 attention and the int8 commit.
      int32_t v = -1;
      if (prod.kind == OpKind::kAttention) {
        v = prod.inputs[2];
        for (const Use& u : ix.uses[size_t(v)]) {
          const OpKind kind = g.ops[u.op].kind;
          if (!(kind == OpKind::kAttention && u.slot == 2) && !(kind == OpKind::kKvCommit && u.slot == 1)) return std::nullopt;
        }
      } else {
        const int64_t qv = ix.producer[size_t(prod.inputs[3])];
        if (qv < 0 || g.ops[size_t(qv)].kind != OpKind::kQuantizeKv) return std::nullopt;
        v = g.ops[size_t(qv)].inputs[0];
        if (!ix.OnlyUsedBy(v, {size_t(qv)})) return std::nullopt;
        for (int32_t o : g.ops[size_t(qv)].outputs) {
          for (const Use& u : ix.uses[size_t(o)]) {
            const OpKind kind = g.ops[u.op].kind;
            if (kind != OpKind::kAttentionQ8 && kind != OpKind::kKvCommitQ8) return std::nullopt;
          }
        }
      }
      const int64_t m = OwnMatMulProducer(g, ix, v, plan.n_kv_heads * plan.head_dim);
      if (m < 0) return std::nullopt;
      plan.kind = "v_rows";
      target(m);
      return plan;
    }
    default:
      return std::nullopt;
  }
}

// Group index (in stats.inputs) → plan, for the groups foldable in this graph; groups seen but
// not foldable map to nullopt. `order` receives the groups in op order.
std::map<size_t, std::optional<FoldPlan>> PlanGraph(const Graph& g, const CalibrationStats& stats,
                                                    std::vector<size_t>* order) {
  const GraphIndex ix(g);
  std::map<size_t, std::vector<size_t>> ops_of_group;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind != OpKind::kMatMul || op.inputs.size() < 2) continue;
    const Value& w = g.values[size_t(op.inputs[1])];
    if (w.kind != ValueKind::kConstant || w.dtype != DType::kF32 || w.shape.size() != 2) continue;
    auto it = stats.by_weight.find(w.name);
    if (it == stats.by_weight.end()) continue;
    if (!ops_of_group.count(it->second)) order->push_back(it->second);
    ops_of_group[it->second].push_back(i);
  }
  std::map<size_t, std::optional<FoldPlan>> plans;
  for (const auto& [group, ops] : ops_of_group) {
    std::optional<FoldPlan> plan = PlanGroup(g, ix, ops);
    // Every weight of the group must be read here (a group split across ops is not folded).
    if (plan && plan->weights.size() != stats.inputs[group].weights.size()) plan.reset();
    plans[group] = std::move(plan);
  }
  return plans;
}

// The f32 constants being rescaled, read once from the graphs' sources.
class WorkingCopies {
 public:
  explicit WorkingCopies(const std::vector<Graph>& graphs) {
    for (const Graph& g : graphs) {
      for (const Value& v : g.values) {
        if (v.kind == ValueKind::kConstant && v.source) values_.emplace(v.name, v);
      }
    }
  }
  const Value& value(const std::string& name) const { return values_.at(name); }
  Result<std::vector<float>*> Get(const std::string& name) {
    auto it = data_.find(name);
    if (it != data_.end()) return &it->second;
    SLM_ASSIGN_OR_RETURN(std::vector<float> data, ReadF32Constant(values_.at(name)));
    return &data_.emplace(name, std::move(data)).first->second;
  }
  // Replaces the sources of every changed constant in every graph.
  void Commit(std::vector<Graph>& graphs, const std::set<std::string>& changed) const {
    std::map<std::string, std::shared_ptr<const graph::ConstantSource>> sources;
    for (const std::string& name : changed) sources[name] = graph::MakeF32Constant(data_.at(name), name + " (awq-scaled)");
    for (Graph& g : graphs) {
      for (Value& v : g.values) {
        auto it = sources.find(v.name);
        if (v.kind == ValueKind::kConstant && it != sources.end()) v.source = it->second;
      }
    }
  }

 private:
  std::map<std::string, Value> values_;
  std::map<std::string, std::vector<float>> data_;
};

// Dequantized values of w [n, k] in `spec` (kNone: w itself).
std::vector<float> RoundTrip(const std::vector<float>& w, int64_t n, int64_t k, const SchemeSpec& spec, bool clip_search) {
  return spec.scheme == Scheme::kNone ? w : Dequantize(QuantizeMatrix(w.data(), n, k, spec, clip_search));
}

// The mean |x_j| per input channel (from Σ|x|, or √(H_jj / rows) without it), floored at 1e-3
// of the largest so that channels the calibration left silent are not scaled toward zero.
std::vector<double> ChannelMagnitudes(const InputHessian& ih) {
  std::vector<double> a(size_t(ih.k));
  const double rows = double(std::max<int64_t>(ih.rows, 1));
  for (int64_t j = 0; j < ih.k; ++j) {
    a[size_t(j)] = ih.abs_sum.size() == size_t(ih.k) ? ih.abs_sum[size_t(j)] / rows
                                                      : std::sqrt(ih.h[size_t(j * ih.k + j)] / rows);
  }
  return a;
}

void FloorMagnitudes(std::vector<double>& a) {
  const double top = *std::max_element(a.begin(), a.end());
  const double floor = top > 0 ? 1e-3 * top : 1.0;
  for (double& v : a) v = std::max(v, floor);
}

// s = a^α, normalized so that max(s)·min(s) = 1.
std::vector<float> ScalesFor(const std::vector<double>& a, double alpha) {
  std::vector<double> s(a.size());
  for (size_t j = 0; j < a.size(); ++j) s[j] = std::pow(a[j], alpha);
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const double norm = std::sqrt(*lo * *hi);
  std::vector<float> out(a.size());
  for (size_t j = 0; j < a.size(); ++j) out[j] = float(s[j] / norm);
  return out;
}

// The loss of one weight [n, k] under input scales s, on evenly spaced rows.
double WeightLoss(const std::vector<float>& w, int64_t n, int64_t k, const std::vector<float>& s,
                  const LowRankFactor& h, const SchemeSpec& spec, const AwqOptions& options) {
  if (spec.scheme == Scheme::kNone) return 0;
  const int64_t rows = std::min(n, std::max<int64_t>(options.max_search_rows, 1));
  std::vector<float> scaled(size_t(rows * k));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = i * n / rows;
    for (int64_t j = 0; j < k; ++j) scaled[size_t(i * k + j)] = w[size_t(r * k + j)] * s[size_t(j)];
  }
  std::vector<float> e = RoundTrip(scaled, rows, k, spec, options.clip_search);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = i * n / rows;
    for (int64_t j = 0; j < k; ++j) {
      float& v = e[size_t(i * k + j)];
      v = w[size_t(r * k + j)] - v / s[size_t(j)];
    }
  }
  return ErrorEnergy(e.data(), rows, h);
}

}  // namespace

std::vector<double> ScaledHessian(const InputHessian& ih, const std::vector<float>& s) {
  const int64_t k = ih.k;
  std::vector<double> h(ih.h);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) h[size_t(i * k + j)] /= double(s[size_t(i)]) * double(s[size_t(j)]);
  }
  return h;
}

Result<AwqResult> ApplyAwqScaling(std::vector<Graph>& graphs, const CalibrationStats& stats, const SchemeOf& scheme_of,
                                  const AwqOptions& options) {
  if (options.grid < 1) return InvalidArgument("awq: grid must be >= 1, found " + std::to_string(options.grid));
  AwqResult result;

  // Plans that every graph agrees on.
  std::vector<size_t> order;
  std::map<size_t, std::optional<FoldPlan>> plans;
  for (const Graph& g : graphs) {
    for (auto& [group, plan] : PlanGraph(g, stats, &order)) {
      auto [it, fresh] = plans.emplace(group, plan);
      if (!fresh && it->second != plan) it->second.reset();
    }
  }
  std::vector<size_t> groups;
  std::set<size_t> seen;
  for (size_t group : order) {
    if (seen.insert(group).second && plans[group]) groups.push_back(group);
  }

  WorkingCopies work(graphs);
  std::set<std::string> changed;
  auto output_sqnr = [&](const std::string& name) -> Result<double> {
    const InputHessian* ih = stats.Find(name);
    const Value& v = work.value(name);
    if (ih == nullptr || ih->rows == 0 || ih->k != v.shape[1]) return std::numeric_limits<double>::quiet_NaN();
    SLM_ASSIGN_OR_RETURN(std::vector<float> * w, work.Get(name));
    const std::vector<float> deq = RoundTrip(*w, v.shape[0], v.shape[1], scheme_of(v), options.clip_search);
    return OutputSqnrDb(w->data(), deq.data(), v.shape[0], v.shape[1], ih->h.data());
  };
  // "Before" figures, on the original values.
  for (size_t group : groups) {
    const FoldPlan& plan = *plans[group];
    std::vector<std::string> names = plan.weights;
    if (plan.kind != "rmsnorm") names.push_back(plan.target);
    for (const std::string& name : names) {
      if (result.rtn_output_sqnr_db.count(name)) continue;
      SLM_ASSIGN_OR_RETURN(double db, output_sqnr(name));
      result.rtn_output_sqnr_db[name] = db;
    }
  }

  for (size_t group : groups) {
    const FoldPlan& plan = *plans[group];
    const InputHessian& ih = stats.inputs[group];
    if (ih.rows == 0) continue;
    const int64_t k = ih.k;
    std::vector<double> a = ChannelMagnitudes(ih);
    if (plan.kind == "v_rows") {  // one scale per kv channel: average over the heads reading it
      const int64_t per_kv = plan.n_heads / plan.n_kv_heads, hd = plan.head_dim;
      for (int64_t kv = 0; kv < plan.n_kv_heads; ++kv) {
        for (int64_t d = 0; d < hd; ++d) {
          double sum = 0;
          for (int64_t h = kv * per_kv; h < (kv + 1) * per_kv; ++h) sum += a[size_t(h * hd + d)];
          for (int64_t h = kv * per_kv; h < (kv + 1) * per_kv; ++h) a[size_t(h * hd + d)] = sum / double(per_kv);
        }
      }
    }
    FloorMagnitudes(a);

    std::vector<std::vector<float>*> weights;
    for (const std::string& name : plan.weights) {
      SLM_ASSIGN_OR_RETURN(std::vector<float> * w, work.Get(name));
      weights.push_back(w);
    }
    // Evaluated 20 times per weight: the factor (K·r²) always pays for itself (max rank K).
    const LowRankFactor factor = *FactorHessian(ih.h.data(), k, k);
    auto loss_at = [&](double alpha) {
      const std::vector<float> s = ScalesFor(a, alpha);
      double loss = 0;
      for (size_t i = 0; i < weights.size(); ++i) {
        const Value& v = work.value(plan.weights[i]);
        loss += WeightLoss(*weights[i], v.shape[0], k, s, factor, scheme_of(v), options);
      }
      return loss;
    };
    AwqGroupReport report;
    report.weights = plan.weights;
    report.fold = plan.kind;
    report.fold_into = plan.target;
    report.rtn_loss = report.loss = loss_at(0);
    if (options.fixed_alpha >= 0) {
      report.alpha = options.fixed_alpha;
      report.loss = loss_at(options.fixed_alpha);
    }
    for (int64_t i = 1; i < options.grid && options.fixed_alpha < 0; ++i) {
      const double alpha = double(i) / double(options.grid);
      const double loss = loss_at(alpha);
      if (loss < report.loss) {
        report.loss = loss;
        report.alpha = alpha;
      }
    }
    for (const std::string& name : plan.weights) result.alpha[name] = report.alpha;
    if (report.alpha == 0) {
      result.groups.push_back(std::move(report));
      continue;
    }
    const std::vector<float> s = ScalesFor(a, report.alpha);

    // Weights: columns × s.
    for (size_t i = 0; i < weights.size(); ++i) {
      std::vector<float>& w = *weights[i];
      for (size_t at = 0; at < w.size(); ++at) w[at] *= s[at % size_t(k)];
      changed.insert(plan.weights[i]);
    }
    // The producer: ÷ s.
    SLM_ASSIGN_OR_RETURN(std::vector<float> * t, work.Get(plan.target));
    if (plan.kind == "rmsnorm") {
      for (int64_t j = 0; j < k; ++j) {
        float& g = (*t)[size_t(j)];
        g = plan.add_one ? (1.0f + g) / s[size_t(j)] - 1.0f : g / s[size_t(j)];
      }
    } else {
      // Row r of the target produces channel r (glu) or kv channel r (v; s of its first head).
      const int64_t rows = work.value(plan.target).shape[0], cols = work.value(plan.target).shape[1];
      std::vector<float>* bias = nullptr;
      if (!plan.target_bias.empty()) {
        SLM_ASSIGN_OR_RETURN(bias, work.Get(plan.target_bias));
        changed.insert(plan.target_bias);
      }
      const int64_t per_kv = plan.kind == "v_rows" ? plan.n_heads / plan.n_kv_heads : 1;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t channel = plan.kind == "v_rows" ? (r / plan.head_dim) * per_kv * plan.head_dim + r % plan.head_dim : r;
        const float inv = 1.0f / s[size_t(channel)];
        for (int64_t c = 0; c < cols; ++c) (*t)[size_t(r * cols + c)] *= inv;
        if (bias) (*bias)[size_t(r)] *= inv;
      }
      result.alpha.emplace(plan.target, std::numeric_limits<double>::quiet_NaN());
    }
    changed.insert(plan.target);
    for (const std::string& name : plan.weights) result.input_scales[name] = s;
    result.groups.push_back(std::move(report));
  }
  work.Commit(graphs, changed);
  return result;
}

}  // namespace slm::quant
