#include "quant/calibration_stats.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <filesystem>
#include <span>

#include "core/thread_pool.h"
#include "graph/memory_plan.h"
#include "kernels/kernels.h"
#include "llm/runner.h"
#include "runtime/program.h"

namespace slm::quant {
namespace {

namespace fs = std::filesystem;

// Sees every kMatMul with a constant f32 [N, K] weight and adds its input rows to the H of
// that input. The per-method plan (op index → slot in stats.inputs; -1 for ops that add
// nothing, including the 2nd and later readers of one input) is built the first time a method
// runs.
class HessianObserver final : public runtime::OpObserver {
 public:
  HessianObserver(CalibrationStats* stats, int64_t skip_positions) : stats_(stats), skip_positions_(skip_positions) {}

  void OnOp(const runtime::Method& method, size_t index, const graph::Op& op, int64_t, int64_t) override {
    if (index == 0) {  // a new method call: it starts where the previous one ended
      call_pos_ += call_rows_;
      call_rows_ = 0;
    }
    if (op.kind != graph::OpKind::kMatMul || !status_.ok()) return;
    const std::vector<int64_t>& plan = PlanFor(method);
    const int64_t slot = index < plan.size() ? plan[index] : -1;
    if (slot < 0) return;
    InputHessian& ih = stats_->inputs[size_t(slot)];
    const graph::Value& x = method.graph().values[size_t(op.inputs[0])];
    const auto* data = static_cast<const float*>(method.value_data(op.inputs[0]));
    auto numel = CheckedNumElements(x.shape);
    if (data == nullptr || !numel.ok() || *numel % ih.k != 0) {
      status_ = Internal("calibration: method '" + method.name() + "' op " + std::to_string(index) +
                         ": input '" + x.name + "' is not readable as rows of " + std::to_string(ih.k));
      return;
    }
    // Rows are positions call_pos_ .. call_pos_ + rows - 1; an op seeing fewer rows than the
    // call (the selected-logits lm_head) sees the last ones. Rows before skip_positions_ are
    // left out.
    const int64_t rows = *numel / ih.k;
    call_rows_ = std::max(call_rows_, rows);
    const int64_t first_pos = call_pos_ + call_rows_ - rows;
    const int64_t skip = std::clamp<int64_t>(skip_positions_ - first_pos, 0, rows);
    if (rows <= skip) return;
    // Decode calls bring one row each: rows wait until a block of them is ready, so that H is
    // swept once per block rather than once per token.
    std::vector<float>& pending = pending_[size_t(slot)];
    pending.insert(pending.end(), data + skip * ih.k, data + rows * ih.k);
    if (int64_t(pending.size()) >= kPendingRows * ih.k) Flush(size_t(slot));
  }
  // Called before each sample (fed from position 0).
  void StartSample() { call_pos_ = call_rows_ = 0; }
  // Adds every pending row to its H; call once the last sample has run.
  void FlushAll() {
    for (size_t slot = 0; slot < pending_.size(); ++slot) Flush(slot);
  }
  const Status& status() const { return status_; }

 private:
  const std::vector<int64_t>& PlanFor(const runtime::Method& method) {
    auto it = plans_.find(method.name());
    if (it != plans_.end()) return it->second;
    const graph::Graph& g = method.graph();
    std::vector<int64_t> plan(g.ops.size(), -1);
    std::map<int32_t, int64_t> slot_of_input;  // input value id → slot, in this method
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const graph::Op& op = g.ops[i];
      if (op.kind != graph::OpKind::kMatMul || op.inputs.size() < 2) continue;
      const graph::Value& w = g.values[size_t(op.inputs[1])];
      const graph::Value& x = g.values[size_t(op.inputs[0])];
      if (w.kind != graph::ValueKind::kConstant || w.dtype != DType::kF32 || w.shape.size() != 2) continue;
      if (x.dtype != DType::kF32) continue;
      const int64_t k = w.shape[1];
      int64_t slot;
      auto known = stats_->by_weight.find(w.name);
      auto same_input = slot_of_input.find(op.inputs[0]);
      if (known != stats_->by_weight.end()) {
        slot = int64_t(known->second);  // seen in an earlier method: accumulate there
      } else if (same_input != slot_of_input.end() && stats_->inputs[size_t(same_input->second)].k == k) {
        slot = same_input->second;  // shares its input with a weight before it (q/k/v, gate/up)
      } else {
        slot = int64_t(stats_->inputs.size());
        InputHessian ih;
        ih.k = k;
        ih.h.assign(size_t(k * k), 0.0);
        stats_->inputs.push_back(std::move(ih));
        pending_.resize(stats_->inputs.size());
      }
      if (known == stats_->by_weight.end()) {
        stats_->by_weight[w.name] = size_t(slot);
        stats_->inputs[size_t(slot)].weights.push_back(w.name);
      }
      // Only the first reader of an input accumulates it: q/k/v (gate/up) add their rows once.
      if (slot_of_input.emplace(op.inputs[0], slot).second) plan[i] = slot;
    }
    return plans_.emplace(method.name(), std::move(plan)).first->second;
  }

  static constexpr int64_t kPendingRows = 64;
  void Flush(size_t slot) {
    std::vector<float>& pending = pending_[slot];
    InputHessian& ih = stats_->inputs[slot];
    if (!pending.empty()) ih.Accumulate(pending.data(), int64_t(pending.size()) / ih.k);
    pending.clear();
  }

  CalibrationStats* stats_;
  std::vector<std::vector<float>> pending_;  // per slot: rows not yet in H, [rows, K]
  int64_t skip_positions_ = 0;
  int64_t call_pos_ = 0, call_rows_ = 0;  // position of the current call's first row; its rows
  std::map<std::string, std::vector<int64_t>> plans_;
  Status status_;
};

// Removes the temporary artifact however the collection ends (the runner keeps it mapped).
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

void InputHessian::Accumulate(const float* x, int64_t n_rows) {
  if (abs_sum.size() != size_t(k)) abs_sum.assign(size_t(k), 0.0);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t a = 0; a < k; ++a) abs_sum[size_t(a)] += std::fabs(double(x[r * k + a]));
  }
  // Blocks of up to 64 rows X [r, K]: XᵀX by the f32 product kernel (y = Xᵀ·(Xᵀ)ᵀ, 64 products
  // summed in f32 per block), added to H in f64, in panels of 256 rows of H so the product's
  // scratch stays small. The whole of H, not a triangle and a mirror: the mirror's column-wise
  // writes (one row of H, 64 KB at K = 8192, apart) cost more than the product. The f32 sum
  // over one block costs ~1e-7 relative, far below what calibration statistics resolve; (a, c)
  // and (c, a) are the same products in the same order, so H stays symmetric.
  constexpr int64_t kBlock = 64, kPanel = 256;
  std::vector<float> xt(static_cast<size_t>(k * std::min(n_rows, kBlock)));
  std::vector<float> y(static_cast<size_t>(std::min(k, kPanel) * k));
  for (int64_t r0 = 0; r0 < n_rows; r0 += kBlock) {
    const int64_t r = std::min(n_rows, r0 + kBlock) - r0;
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t a = 0; a < k; ++a) xt[size_t(a * r + i)] = x[(r0 + i) * k + a];
    }
    for (int64_t a0 = 0; a0 < k; a0 += kPanel) {
      const int64_t rows_of_h = std::min(k, a0 + kPanel) - a0;
      ThreadPool::Default().ParallelFor(k, 16, [&](int64_t nb, int64_t ne) {
        kernels::MatMulF32Columns(xt.data() + a0 * r, xt.data(), nullptr, y.data(), rows_of_h, r, k, nb, ne);
      });
      for (int64_t a = 0; a < rows_of_h; ++a) {
        double* ha = h.data() + (a0 + a) * k;
        const float* ya = y.data() + a * k;
        for (int64_t c = 0; c < k; ++c) ha[c] += double(ya[c]);
      }
    }
  }
  rows += n_rows;
}

Result<CalibrationStats> CollectCalibrationStats(const model::PreparedCompile& prepared,
                                                 const CalibrationInput& input) {
  if (input.empty()) return InvalidArgument("calibration: no samples and no text to calibrate on");
  static std::atomic<int> counter{0};
  TempFile temp{(fs::temp_directory_path() / ("slm-calibration-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(counter++) + ".slm")).string()};
  {
    model::PreparedCompile copy = prepared;  // graphs share the constant sources: no weight copies
    for (graph::Graph& g : copy.graphs) {
      Status s = graph::PlanMemory(g);
      if (!s.ok()) return Status(s.code(), "calibration: planning method '" + g.name + "': " + s.message());
    }
    auto written = model::WritePreparedArtifact(std::move(copy), temp.path);
    if (!written.ok()) return Status(written.status().code(), "calibration: writing the f32 model: " + written.status().message());
  }
  llm::RunnerOptions ro;
  ro.session.tail_policy = llm::TailPolicy::kDecode;  // every computed row is a real token
  SLM_ASSIGN_OR_RETURN(std::unique_ptr<llm::Runner> runner, llm::Runner::Load(temp.path, ro));

  std::vector<std::vector<int32_t>> samples = input.samples;
  if (!input.text.empty()) {
    if (input.text_samples < 1 || input.text_length < 1) {
      return InvalidArgument("calibration: text_samples and text_length must be >= 1, found " +
                             std::to_string(input.text_samples) + " and " + std::to_string(input.text_length));
    }
    auto ids = runner->Encode(input.text);
    if (!ids.ok()) return Status(ids.status().code(), "calibration: tokenizing the text: " + ids.status().message());
    const size_t len = size_t(input.text_length);
    for (size_t at = 0; at + len <= ids->size() && int64_t(samples.size() - input.samples.size()) < input.text_samples; at += len) {
      samples.emplace_back(ids->begin() + std::ptrdiff_t(at), ids->begin() + std::ptrdiff_t(at + len));
    }
    if (samples.size() == input.samples.size() && !ids->empty()) samples.push_back(*ids);
  }

  CalibrationStats stats;
  HessianObserver observer(&stats, input.skip_positions);
  llm::Session& session = runner->session();
  std::vector<float> logits(size_t(session.vocab_size()));
  const int64_t max_len = session.max_context_len();
  for (size_t i = 0; i < samples.size(); ++i) {
    std::span<const int32_t> ids(samples[i]);
    if (int64_t(ids.size()) > max_len) ids = ids.first(size_t(max_len));
    if (int64_t(ids.size()) <= input.skip_positions) continue;
    session.Reset();
    observer.StartSample();
    {
      runtime::ScopedOpObserver scope(&observer);
      Status s = session.Feed(ids, logits);
      if (!s.ok()) return Status(s.code(), "calibration sample " + std::to_string(i) + ": " + s.message());
    }
    SLM_RETURN_IF_ERROR(observer.status());
    ++stats.samples;
    stats.tokens += int64_t(ids.size());
  }
  observer.FlushAll();
  if (stats.samples == 0) {
    return InvalidArgument("calibration: no sample is longer than skip_positions (" + std::to_string(input.skip_positions) + " tokens)");
  }
  return stats;
}

}  // namespace slm::quant
