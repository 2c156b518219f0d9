// The quantization stage: rewrites the f32 weight constants of compiled method graphs into
// int8 / int4 constants (layouts of kernels/quant_kernels.h) and their ops into kMatMulQ /
// kEmbeddingQ, before the artifact is written.
//
// Schemes (per tensor; a config picks one for the linear layers and overrides per name):
//   int8   weight-only, per output channel, symmetric          (f32 activations)
//   int4   weight-only, group-wise (32/64/128), sym or asym   (f32 activations)
//   8da8w  int8 weights as int8; activations quantized per row to int8 at run time
//   8da4w  int4 weights as int4; activations quantized per row to int8 at run time
//   none   keep float32
// A tensor whose K is not a multiple of the int4 group falls back to the int8 variant of the
// same activation mode (int4 → int8, 8da4w → 8da8w); the report says so.
//
// Tied embeddings: the embedding table and the lm_head are one f32 constant in the graph. They
// are quantized independently (each by its own option); when both end up with the same scheme
// they share one quantized constant (stored once), otherwise each is stored in its own form
// (e.g. f32 embedding rows + int4 lm_head: the f32 table stays and the int4 copy is added).
//
// Every quantized tensor is quantized once, when QuantizeGraphs runs (the bytes are cached in
// the constant sources, so the artifact writer, which reads each source twice, never
// re-quantizes). Methods share the sources, so each tensor is stored once in the artifact.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "graph/graph.h"

namespace slm::quant {

enum class Scheme { kNone, kInt8, kInt4, k8da8w, k8da4w };

struct SchemeSpec {
  Scheme scheme = Scheme::kNone;
  int64_t group = 32;       // int4 / 8da4w only: 32, 64 or 128
  bool asymmetric = false;  // int4 / 8da4w only: per-group offsets (min/max) instead of ±8
};

// "none" | "f32" | "int8" | "int4" | "8da8w" | "8da4w", optionally suffixed "-g64" (group) and/or
// "-asym", e.g. "int4-g64-asym". Errors name the text.
Result<SchemeSpec> ParseScheme(const std::string& text);
std::string SchemeName(const SchemeSpec& s);  // canonical, e.g. "int4-g32", "8da4w-g64-asym"

// How a weight's values are chosen (the stored format is the same either way):
//   rtn   round to nearest (no calibration);
//   gptq  GPTQ error compensation on calibration activations (gptq.h); needs CalibrationStats;
//   awq   activation-aware input-channel scaling folded into the producing op, then round to
//         nearest (awq.h); needs CalibrationStats;
//   awq+gptq  the same scaling, then GPTQ on the scaled weights and statistics.
enum class Method { kRtn, kGptq, kAwq, kAwqGptq };
Result<Method> ParseMethod(const std::string& text);  // "rtn" | "gptq" | "awq" | "awq+gptq"
inline bool UsesAwqScaling(Method m) { return m == Method::kAwq || m == Method::kAwqGptq; }
inline bool UsesGptqValues(Method m) { return m == Method::kGptq || m == Method::kAwqGptq; }
const char* MethodName(Method m);

struct GptqOptions {
  double percdamp = 0.01;    // dampening: + percdamp · mean(diag H) on the diagonal
  int64_t block_size = 128;  // columns per lazy batch update (int4: rounded to whole groups)
  bool act_order = false;    // quantize inputs in order of decreasing activation energy
  // int4: choose each group's range by a search over shrink factors minimizing the
  // diag-H-weighted error (the reference implementation's "mse" grid), instead of min/max.
  // On by default: on stories260K 8da4w-g32 it adds ~0.4 dB of logits SQNR over plain GPTQ.
  // Off, GPTQ with H = I reproduces round-to-nearest exactly.
  bool clip_search = true;
};

struct AwqOptions {
  int64_t grid = 20;              // α ∈ {0, 1/grid, …, (grid − 1)/grid}
  int64_t max_search_rows = 512;  // output rows per weight the loss is evaluated on (evenly spaced)
  bool clip_search = true;        // int4: the range search of QuantizeInt4Groups (as stored)
  // >= 0: this α for every foldable group instead of the search (the folds' exactness tests).
  double fixed_alpha = -1;
};

// Per-weight input statistics from calibration (calibration_stats.h).
struct CalibrationStats;

struct QuantConfig {
  // rtn or gptq for the linear layers (and the lm_head when quantized); embedding rows are
  // always rounded to nearest (a lookup has no input activations to compensate over).
  Method method = Method::kRtn;
  GptqOptions gptq;
  AwqOptions awq;  // clip_search is taken from `clip_search` below
  // int4 round to nearest (every int4 tensor not chosen by GPTQ, embedding rows included):
  // choose each group's range by the search of QuantizeInt4Groups (least squared weight error)
  // instead of min/max. Off (CLI --quant-no-clip-search) reproduces the plain min/max codes.
  bool clip_search = true;
  // Every linear layer (kMatMul with a constant weight) except the lm_head.
  SchemeSpec linear;
  // Embedding table rows: kNone (keep f32), kInt8 or kInt4 (weight-only forms only).
  SchemeSpec embeddings;
  // Quantize the lm_head (the last kMatMul of each graph) with `linear`'s scheme.
  bool quantize_lm_head = false;
  // (pattern, scheme): first match wins over the rules above; matched against the weight's
  // constant name (the HF tensor name, e.g. "model.layers.3.mlp.down_proj.weight"). A pattern
  // is a glob (fnmatch: *, ?, [...]) or, prefixed with "re:", an ECMAScript regex (full match).
  // The lm_head also matches as "lm_head.weight" when tied (its constant is the embedding
  // table's). QuantizeGraphs fails with InvalidArgument naming a pattern that chose no weight.
  std::vector<std::pair<std::string, SchemeSpec>> overrides;
};

// The options of the config's method, as recorded in the artifact metadata and the pipeline
// fingerprint: {"gptq": {...}} and / or {"awq": {...}}, or {} for rtn.
nlohmann::json MethodOptionsJson(const QuantConfig& config);

// Parses "pattern=scheme" (the CLI's --quant-override).
Result<std::pair<std::string, SchemeSpec>> ParseOverride(const std::string& text);

struct TensorReport {
  std::string name;     // the f32 constant's name
  std::string use;      // "linear" | "lm_head" | "embedding"
  std::string scheme;   // SchemeName actually applied
  std::string note;     // e.g. "K=172 not a multiple of group 32: int8 instead"
  Shape shape;          // f32 shape [N, K]
  uint64_t f32_bytes = 0, quant_bytes = 0;
  double weight_sqnr_db = 0;  // 10·log10(Σw² / Σ(w - ŵ)²) over the tensor
  std::string method = "rtn";  // how the values were chosen: "rtn" | "gptq"
  // With calibration statistics (NaN without): output SQNR on the calibration activations,
  // 10·log10(‖XWᵀ‖² / ‖X(W − Ŵ)ᵀ‖²), of round-to-nearest (`rtn_…`, the "before") and of the
  // values actually stored (equal to rtn_… when method is rtn).
  double rtn_output_sqnr_db = std::numeric_limits<double>::quiet_NaN();
  double output_sqnr_db = std::numeric_limits<double>::quiet_NaN();
  int64_t calibration_rows = 0;  // activation rows behind those figures
};

struct QuantReport {
  std::vector<TensorReport> tensors;
  uint64_t f32_bytes = 0, quant_bytes = 0;  // of the quantized tensors only
  // {"schemes": {name: scheme}, "tensors": [...]}: recorded in the artifact metadata.
  nlohmann::json ToJson() const;
  std::string ToText() const;
};

// Rewrites `graphs` in place (all methods of one program; they must share constant sources for
// sharing to carry over). Constants left unused by the rewrite are removed from the graphs.
// `stats` (optional; required by every method but kRtn) adds output SQNR figures to the report; a
// linear weight with no statistics (never reached by the calibration) falls back to rtn, with
// a note.
Result<QuantReport> QuantizeGraphs(std::vector<graph::Graph>& graphs, const QuantConfig& config,
                                   const CalibrationStats* stats = nullptr);

// ---- Building blocks (tests, calibration) ----

// Quantized forms of one [N, K] float32 matrix (layouts of kernels/quant_kernels.h).
struct QuantizedMatrix {
  int bits = 8;
  int64_t n = 0, k = 0, group = 0;  // group 0 for int8 per channel
  std::vector<uint8_t> q;           // int8 [N,K] (as bytes) or packed int4 [N, K/2]
  std::vector<float> scales;        // [N] or [N, K/G]
  std::vector<float> offsets;       // [N, K/G] when asymmetric, else empty
};
QuantizedMatrix QuantizeInt8PerChannel(const float* w, int64_t n, int64_t k);
// int4: each group's range by detail::Int4SearchGroupParams (the least Σ(w − ŵ)² over a grid
// of clipped ranges, each refit by least squares) when search_range, else min/max
// (detail::Int4GroupParams).
QuantizedMatrix QuantizeInt4Groups(const float* w, int64_t n, int64_t k, int64_t group,
                                   bool asymmetric, bool search_range = true);
// w in the weight format of `spec`: int4 groups (int4 / 8da4w) or int8 per channel (int8 / 8da8w).
QuantizedMatrix QuantizeMatrix(const float* w, int64_t n, int64_t k, const SchemeSpec& spec, bool search_range);
// The values of an f32 constant, read from its source; errors name it.
Result<std::vector<float>> ReadF32Constant(const graph::Value& v);
// Dequantized [N, K] float32.
std::vector<float> Dequantize(const QuantizedMatrix& m);
// 10·log10(Σ ref² / Σ (ref - got)²); +inf when equal.
double SqnrDb(const float* ref, const float* got, size_t n);

}  // namespace slm::quant
