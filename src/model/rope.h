// Rotary position embedding parameters, and the inverse-frequency table folded from them at
// compile time, computed as Hugging Face transformers computes it (modeling_rope_utils.py).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace slm::model {

// config.json "rope_scaling" {"rope_type" (legacy "type"): ...}. Values are not serialized;
// more types (dynamic, yarn) are appended when their families land.
enum class RopeScalingType { kNone, kLinear, kLlama3, kLongRope };
// "default", "linear", "llama3", "longrope"
const char* RopeScalingTypeName(RopeScalingType t);

struct RopeSpec {
  double theta = 10000.0;  // rope_theta
  // Leading dims of each head that rotate: int(head_dim * partial_rotary_factor). Even, > 0.
  int64_t rotary_dim = 0;
  RopeScalingType scaling = RopeScalingType::kNone;
  double factor = 1.0;            // linear, llama3: frequencies divided by it
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  // llama3, longrope: the pre-training context (longrope: config.json's top-level key).
  int64_t original_max_position_embeddings = 0;
  // longrope (Phi-3, Phi-4-mini): per-pair frequency divisors, rotary_dim/2 each. HF uses the
  // short factors for a forward call whose max position + 1 <= original_max_position_embeddings,
  // the long ones otherwise (RopeTables::long_inv_freq, switch_len).
  std::vector<double> short_factor, long_factor;
  // longrope: multiplies cos and sin; rope_scaling.attention_factor, or derived from
  // max_position_embeddings / original_max_position_embeddings as transformers does.
  double attention_factor = 1.0;
};

// InvalidArgument naming the field when `rope` cannot give a table: theta, factor or
// rotary_dim not positive, rotary_dim odd, llama3 with high_freq_factor <= low_freq_factor or
// no original context, longrope factors not rotary_dim/2 positive numbers.
Status ValidateRopeSpec(const RopeSpec& rope);

struct RopeTables {
  // [rotary_dim / 2]: angle of pair i at position p is p * inv_freq[i] (HF rotate_half
  // pairs (i, i + rotary_dim/2)).
  std::vector<float> inv_freq;
  // Multiplies cos and sin; 1 except for longrope (attention_factor, the same for both tables).
  float attention_scaling = 1.0f;
  // longrope only: the long-factor table [rotary_dim / 2], used by a call whose largest
  // position p satisfies p + 1 > switch_len (original_max_position_embeddings); inv_freq (short
  // factors) otherwise. Empty / 0 for every other rope type.
  std::vector<float> long_inv_freq;
  int64_t switch_len = 0;
};

// inv_freq as transformers computes it in float32, step by step in torch's order:
//   default: 1 / base^(float(2i) / dim)           (base, dim converted to float32)
//   linear:  default / factor
//   llama3:  default, then wavelength bands: kept where wavelen < orig/high_freq_factor,
//            divided by factor where wavelen > orig/low_freq_factor, interpolated between.
//   longrope: 1 / (short_factor[i] * base^(float(2i) / dim)), and long_inv_freq the same with
//            long_factor (transformers' longrope_frequency_update swaps them per call).
// float32 pow is taken correctly rounded (pow in double, rounded once), as an exact float32 pow
// gives; torch's vectorized powf is within 1 ulp of it. Precondition: ValidateRopeSpec(rope)
// is OK (ParseModelSpec guarantees it); otherwise the table is empty.
RopeTables ComputeRopeTables(const RopeSpec& rope);

}  // namespace slm::model
