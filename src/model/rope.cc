#include "model/rope.h"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

namespace slm::model {
namespace {

// pow of two float32 values, correctly rounded: double's pow is accurate far beyond float32,
// so one rounding of its result gives the float32 nearest to the true power.
float PowF32(float base, float exponent) {
  return static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
}

// _compute_default_rope_parameters:
//   1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
// Every step is a float32 tensor op; Python scalars are converted to float32 first. `1.0 / t`
// is torch's reciprocal(t) * 1.0, the same float32 value as 1.0f / t.
std::vector<float> DefaultInvFreq(double theta, int64_t dim) {
  const float base = static_cast<float>(theta);
  const float fdim = static_cast<float>(dim);
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / fdim;
    inv_freq[i] = 1.0f / PowF32(base, exponent);
  }
  return inv_freq;
}

// _compute_linear_scaling_rope_parameters: inv_freq /= factor.
void ApplyLinear(const RopeSpec& rope, std::vector<float>& inv_freq) {
  const float factor = static_cast<float>(rope.factor);
  for (float& f : inv_freq) f /= factor;
}

// _compute_llama3_parameters, element by element, in the same float32 operation order.
// Python-side scalars (wavelength bounds, 2π, the band width) are doubles converted to float32
// where they meet a tensor; `a / tensor` is torch's reciprocal(tensor) * a.
void ApplyLlama3(const RopeSpec& rope, std::vector<float>& inv_freq) {
  const double old_context_len = static_cast<double>(rope.original_max_position_embeddings);
  const float factor = static_cast<float>(rope.factor);
  const float low_freq_wavelen = static_cast<float>(old_context_len / rope.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_context_len / rope.high_freq_factor);
  const float two_pi = static_cast<float>(2 * std::numbers::pi);
  const float old_context_f = static_cast<float>(old_context_len);
  const float low_freq_factor = static_cast<float>(rope.low_freq_factor);
  const float band = static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
  for (float& f : inv_freq) {
    const float wavelen = (1.0f / f) * two_pi;
    // Long wavelengths (low frequencies) are divided by the factor; short ones are kept.
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * old_context_f - low_freq_factor) / band;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : scaled;
  }
}

// _compute_longrope_parameters, ext_factors = short_factor or long_factor:
//   1.0 / (ext_factors * base ** (torch.arange(0, dim, 2).float() / dim)), all float32.
std::vector<float> LongRopeInvFreq(const RopeSpec& rope, const std::vector<double>& factors) {
  const float base = static_cast<float>(rope.theta);
  const float fdim = static_cast<float>(rope.rotary_dim);
  std::vector<float> inv_freq(static_cast<size_t>(rope.rotary_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / fdim;
    const float ext = static_cast<float>(factors[i]);
    inv_freq[i] = 1.0f / (ext * PowF32(base, exponent));
  }
  return inv_freq;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status RopeError(const std::string& field, const std::string& found, const char* expected) {
  return InvalidArgument("rope: " + field + " is " + found + ", expected " + expected);
}

}  // namespace

const char* RopeScalingTypeName(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "default";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kLongRope: return "longrope";
  }
  return "unknown";
}

Status ValidateRopeSpec(const RopeSpec& rope) {
  if (!(rope.theta > 0) || !std::isfinite(rope.theta)) {
    return RopeError("theta", Num(rope.theta), "a positive number");
  }
  if (rope.rotary_dim <= 0 || rope.rotary_dim % 2 != 0) {
    return RopeError("rotary_dim", std::to_string(rope.rotary_dim), "a positive even number");
  }
  if (rope.scaling == RopeScalingType::kNone) return Status::Ok();
  if (rope.scaling == RopeScalingType::kLongRope) {
    const size_t half = static_cast<size_t>(rope.rotary_dim / 2);
    for (const auto* f : {&rope.short_factor, &rope.long_factor}) {
      const char* name = f == &rope.short_factor ? "short_factor" : "long_factor";
      if (f->size() != half) {
        return RopeError(std::string(name) + " length", std::to_string(f->size()),
                         ("rotary_dim/2 = " + std::to_string(half)).c_str());
      }
      for (double x : *f) {
        if (!(x > 0) || !std::isfinite(x)) return RopeError(name, Num(x), "positive numbers");
      }
    }
    if (!(rope.attention_factor > 0) || !std::isfinite(rope.attention_factor)) {
      return RopeError("attention_factor", Num(rope.attention_factor), "a positive number");
    }
    if (rope.original_max_position_embeddings <= 0) {
      return RopeError("original_max_position_embeddings",
                       std::to_string(rope.original_max_position_embeddings), "a positive integer");
    }
    return Status::Ok();
  }
  if (!(rope.factor > 0) || !std::isfinite(rope.factor)) {
    return RopeError("factor", Num(rope.factor), "a positive number");
  }
  if (rope.scaling == RopeScalingType::kLlama3) {
    if (!(rope.low_freq_factor > 0) || !std::isfinite(rope.high_freq_factor) ||
        !(rope.high_freq_factor > rope.low_freq_factor)) {
      return RopeError("low_freq_factor/high_freq_factor",
                       Num(rope.low_freq_factor) + "/" + Num(rope.high_freq_factor),
                       "0 < low_freq_factor < high_freq_factor");
    }
    if (rope.original_max_position_embeddings <= 0) {
      return RopeError("original_max_position_embeddings",
                       std::to_string(rope.original_max_position_embeddings), "a positive integer");
    }
  }
  return Status::Ok();
}

RopeTables ComputeRopeTables(const RopeSpec& rope) {
  RopeTables tables;
  if (!ValidateRopeSpec(rope).ok()) return tables;
  tables.inv_freq = DefaultInvFreq(rope.theta, rope.rotary_dim);
  switch (rope.scaling) {
    case RopeScalingType::kNone: break;
    case RopeScalingType::kLinear: ApplyLinear(rope, tables.inv_freq); break;
    case RopeScalingType::kLlama3: ApplyLlama3(rope, tables.inv_freq); break;
    case RopeScalingType::kLongRope:
      tables.inv_freq = LongRopeInvFreq(rope, rope.short_factor);
      tables.long_inv_freq = LongRopeInvFreq(rope, rope.long_factor);
      tables.switch_len = rope.original_max_position_embeddings;
      tables.attention_scaling = static_cast<float>(rope.attention_factor);
      break;
  }
  return tables;
}

}  // namespace slm::model
