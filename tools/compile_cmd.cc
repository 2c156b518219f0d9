#include <cstdio>

#include "core/mapped_file.h"
#include "model/compiler.h"
#include "quant/compile_quantized.h"
#include "tools/commands.h"

namespace slm::cli {

Action AddCompile(CLI::App& app) {
  struct Args {
    std::string checkpoint, output;
    int64_t max_context = 0;
    int64_t prefill_step = 32;
    std::string sliding = "ring";
    std::string kv_cache = "f32";
    std::vector<int64_t> prefill_steps;
    bool state_outputs = false;
    // Quantization (docs/quantization.md).
    std::string quant = "none", quant_embeddings = "none";
    int64_t group = 32;
    bool asym = false, quant_lm_head = false, quant_report = false, quant_no_clip_search = false;
    std::vector<std::string> quant_overrides;
    // Calibration-aware quantization (GPTQ).
    std::string quant_method = "rtn", calibration;
    int64_t calibration_samples = 8, calibration_length = 64, calibration_skip = 4;
    double gptq_damp = 0.01;
    bool gptq_act_order = false, gptq_no_clip_search = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a Hugging Face checkpoint directory into one .slm artifact");
  cmd->add_option("checkpoint", args->checkpoint, "HF checkpoint directory (config.json, *.safetensors, tokenizer)")->required();
  cmd->add_option("-o,--output", args->output, "artifact path to write (atomically)")->required();
  cmd->add_option("--max-context", args->max_context, "max context length (default: min(max_position_embeddings, 2048))");
  auto* one_step = cmd->add_option("--prefill-step", args->prefill_step, "tokens per prefill call (C); alias of --prefill-steps C")->capture_default_str();
  cmd->add_option("--prefill-steps", args->prefill_steps, "several prefill methods sharing weights and caches, e.g. 16,64 (methods prefill_16, prefill_64)")
      ->delimiter(',')
      ->excludes(one_step);
  cmd->add_flag("--state-outputs", args->state_outputs, "methods also return their updated caches (k_cache_out.<i>, v_cache_out.<i>), bound as aliases by the runner");
  cmd->add_option("--sliding", args->sliding,
                  "cache of sliding-window layers: ring (window slots) or full-length (max context; "
                  "the mask enforces the window)")
      ->check(CLI::IsMember({"ring", "full-length"}))
      ->capture_default_str();
  cmd->add_option("--kv-cache", args->kv_cache,
                  "KV cache element type: f32, or int8 (per token and head scales; cache format kv_int8_tokenhead_v1)")
      ->check(CLI::IsMember({"f32", "int8"}))
      ->capture_default_str();
  cmd->add_option("--quant", args->quant, "weights of the linear layers: none | int8 | int4 | 8da8w | 8da4w")->capture_default_str();
  cmd->add_option("--group", args->group, "int4 / 8da4w group size: 32, 64 or 128")->capture_default_str();
  cmd->add_flag("--asym", args->asym, "int4 / 8da4w: asymmetric groups (min/max offsets) instead of symmetric");
  cmd->add_option("--quant-embeddings", args->quant_embeddings, "embedding table rows: none | int8 | int4")->capture_default_str();
  cmd->add_flag("--quant-no-clip-search", args->quant_no_clip_search, "int4 / 8da4w round to nearest: take each group's range from min/max instead of searching the clipped range with the least squared weight error");
  cmd->add_flag("--quant-lm-head", args->quant_lm_head, "quantize the lm_head with the --quant scheme too (tied: stored separately unless embeddings use the same scheme)");
  cmd->add_option("--quant-override", args->quant_overrides, "PATTERN=SCHEME for matching weight names (glob, or re:REGEX), e.g. '*.down_proj.weight=int8'; first match wins; repeatable");
  cmd->add_flag("--quant-report", args->quant_report, "print the per-tensor quantization report on stderr");
  cmd->add_option("--quant-method", args->quant_method, "how quantized values are chosen: rtn (round to nearest) | gptq (error compensation on --calibration activations) | awq (activation-aware channel scaling on --calibration activations, then round to nearest) | awq+gptq (the scaling, then gptq)")
      ->check(CLI::IsMember({"rtn", "gptq", "awq", "awq+gptq"}))
      ->capture_default_str();
  cmd->add_option("--calibration", args->calibration, "text file to calibrate on (tokenized by the model's tokenizer); needed by --quant-method gptq, awq and awq+gptq, adds output SQNR to --quant-report");
  cmd->add_option("--calibration-samples", args->calibration_samples, "calibration windows taken from the start of the text")->capture_default_str();
  cmd->add_option("--calibration-length", args->calibration_length, "tokens per calibration window")->capture_default_str();
  cmd->add_option("--calibration-skip", args->calibration_skip, "leave the first N positions of every window out of the statistics (attention-sink rows)")->capture_default_str();
  cmd->add_option("--gptq-damp", args->gptq_damp, "GPTQ dampening, as a fraction of the mean Hessian diagonal")->capture_default_str();
  cmd->add_flag("--gptq-act-order", args->gptq_act_order, "GPTQ: quantize input columns in order of decreasing activation energy");
  cmd->add_flag("--gptq-no-clip-search", args->gptq_no_clip_search, "GPTQ int4: take each group's range from min/max instead of searching the clipping range with the least activation-weighted error");
  return [args]() {
    model::CompileOptions opt;
    opt.max_context_len = args->max_context;
    opt.prefill_steps = args->prefill_steps.empty() ? std::vector<int64_t>{args->prefill_step} : args->prefill_steps;
    opt.state_outputs = args->state_outputs;
    auto sliding = model::ParseSlidingMode(args->sliding);
    if (!sliding.ok()) return Fail(sliding.status());
    opt.sliding_mode = *sliding;
    auto kv_cache = model::ParseKvCacheDType(args->kv_cache);
    if (!kv_cache.ok()) return Fail(kv_cache.status());
    opt.kv_cache = *kv_cache;
    auto with_group = [&](const std::string& base) {
      std::string text = base;
      if (base == "int4" || base == "8da4w") text += "-g" + std::to_string(args->group) + (args->asym ? "-asym" : "");
      return quant::ParseScheme(text);
    };
    quant::QuantConfig qc;
    auto linear = with_group(args->quant);
    if (!linear.ok()) return Fail(linear.status());
    qc.linear = *linear;
    auto emb = with_group(args->quant_embeddings);
    if (!emb.ok()) return Fail(emb.status());
    qc.embeddings = *emb;
    qc.quantize_lm_head = args->quant_lm_head;
    qc.clip_search = !args->quant_no_clip_search;
    auto method = quant::ParseMethod(args->quant_method);
    if (!method.ok()) return Fail(method.status());
    qc.method = *method;
    qc.gptq.percdamp = args->gptq_damp;
    qc.gptq.act_order = args->gptq_act_order;
    qc.gptq.clip_search = !args->gptq_no_clip_search;
    quant::CalibrationInput calibration;
    if (!args->calibration.empty()) {
      auto text = ReadFileToString(args->calibration);
      if (!text.ok()) return Fail(text.status());
      calibration.text = std::move(*text);
      calibration.text_samples = args->calibration_samples;
      calibration.text_length = args->calibration_length;
      calibration.skip_positions = args->calibration_skip;
    } else if (qc.method != quant::Method::kRtn) {
      return Fail(InvalidArgument(std::string("--quant-method ") + quant::MethodName(qc.method) +
                                  " needs --calibration FILE (text to collect activations on)"));
    }
    for (const std::string& o : args->quant_overrides) {
      auto parsed = quant::ParseOverride(o);
      if (!parsed.ok()) return Fail(parsed.status());
      qc.overrides.push_back(*parsed);
    }
    const bool quantize = qc.linear.scheme != quant::Scheme::kNone || qc.embeddings.scheme != quant::Scheme::kNone ||
                          !qc.overrides.empty();
    Result<model::CompileReport> report = InvalidArgument("unreachable");
    if (quantize) {
      auto q = quant::CompileQuantized(args->checkpoint, args->output, opt, qc, calibration);
      if (!q.ok()) return Fail(q.status());
      if (args->quant_report) std::fprintf(stderr, "%s", q->quant.ToText().c_str());
      std::fprintf(stderr, "quantized %zu tensors: %.2f MiB -> %.2f MiB\n", q->quant.tensors.size(),
                   q->quant.f32_bytes / 1048576.0, q->quant.quant_bytes / 1048576.0);
      report = q->compile;
    } else {
      report = model::CompileCheckpoint(args->checkpoint, args->output, opt);
    }
    if (!report.ok()) return Fail(report.status());
    std::fprintf(stderr, "wrote %s: %.2f MiB, max context %lld, methods:", report->artifact_path.c_str(),
                 report->artifact_bytes / 1048576.0, static_cast<long long>(report->max_context_len));
    for (const auto& m : report->methods) std::fprintf(stderr, " %s", m.c_str());
    std::fprintf(stderr, "\n");
    return 0;
  };
}

}  // namespace slm::cli
