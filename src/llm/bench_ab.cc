#include "llm/bench_ab.h"

#include "kernels/decode_prefetch.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/quant_kernels.h"

namespace slm::llm {

void AbSwitch::Restore(const Bodies& b) const {
  kernels::SetQ8DecodePrefetchIntoL1EnabledForTest(b.l1_prefetch);
  kernels::SetVnniEnabledForTest(b.vnni);
  kernels::SetAvxVnniEnabledForTest(b.avx_vnni);
  kernels::SetAmxEnabledForTest(b.amx);
  kernels::SetDotprodEnabledForTest(b.dotprod);
  kernels::SetI8mmEnabledForTest(b.i8mm);
  kernels::SetInt4DecodeX16(b.int4_x16);
}

Result<AbSwitch> AbSwitch::Parse(std::string_view spec) {
  AbSwitch s;
  s.name_ = std::string(spec);
  // A feature the CPU lacks stays off whatever its flag says, so the flags can be put back as
  // they read now.
  s.defaults_ = {kernels::Q8DecodePrefetchIntoL1(), kernels::VnniAvailable(), kernels::AvxVnniAvailable(),
                 kernels::AmxAvailable(), kernels::DotprodAvailable(), kernels::I8mmAvailable(),
                 kernels::Int4DecodeX16Enabled()};
  const std::string active = kernels::ActiveSimdTarget();
  s.default_target_ = active;
  // Restored as "best" (every body the CPU has, AMX included) when the best target is active;
  // by name otherwise (--simd-target chose it).
  s.default_target_is_best_ = active == kernels::BestSimdTarget();
  const auto unavailable = [&](const char* what) {
    return InvalidArgument("bench --ab " + s.name_ + ": " + what +
                           " not in use on this CPU and build (or switched off), so there is nothing to compare");
  };
  if (spec == "l1-prefetch") {
    if (!s.defaults_.l1_prefetch) return unavailable("the int8 decode tile's L1 prefetch is");
    s.kind_ = Kind::kL1Prefetch;
    s.description_ = "int8 decode tile prefetching into L2, not L1";
  } else if (spec == "vnni") {
    if (!s.defaults_.vnni && !s.defaults_.avx_vnni) return unavailable("neither AVX-512 VNNI nor AVX-VNNI is");
    s.kind_ = Kind::kVnni;
    s.description_ = "no AVX-512 VNNI / AVX-VNNI bodies (Highway bodies instead)";
  } else if (spec == "avx-vnni") {
    if (!s.defaults_.avx_vnni) return unavailable("AVX-VNNI is");
    s.kind_ = Kind::kAvxVnni;
    s.description_ = "no AVX-VNNI bodies";
  } else if (spec == "amx") {
    if (!s.defaults_.amx) return unavailable("AMX-INT8 is");
    s.kind_ = Kind::kAmx;
    s.description_ = "no AMX panels (AVX-512 VNNI panels instead)";
  } else if (spec == "dotprod") {
    if (!s.defaults_.dotprod) return unavailable("the Arm dot product is");
    s.kind_ = Kind::kDotprod;
    s.description_ = "no Arm dot-product bodies (Highway bodies instead)";
  } else if (spec == "i8mm") {
    if (!s.defaults_.i8mm) return unavailable("the Arm int8 matrix multiply (smmla) is");
    s.kind_ = Kind::kI8mm;
    s.description_ = "no smmla panels (sdot instead)";
  } else if (spec == "int4-x16") {
    // The switch acts where the tile would run: the AVX2 target with no VNNI body ahead of it.
    const bool was = kernels::Int4DecodeX16Enabled();
    if (!kernels::Int4DecodeX16Applies()) return unavailable("the int4 decode's 16-bit x tile (x86 AVX2 without VNNI) is");
    s.kind_ = Kind::kInt4X16;
    s.description_ = was ? "int4 decode with f32 x, not x rounded to 16 bits" : "int4 decode with x rounded to 16 bits";
  } else if (spec.substr(0, 5) == "simd=") {
    s.kind_ = Kind::kSimdTarget;
    s.variant_target_ = std::string(spec.substr(5));
    // Validates the name (the error lists the supported targets), then puts the defaults back.
    if (Status st = kernels::SelectSimdTarget(s.variant_target_); !st.ok()) return InvalidArgument("bench --ab: " + st.message());
    const std::string variant_active = kernels::ActiveSimdTarget(), variant_bodies = kernels::ActiveIntrinsicBodies();
    if (Status st = s.Select(false); !st.ok()) return st;
    if (variant_active == active && variant_bodies == kernels::ActiveIntrinsicBodies()) {
      return InvalidArgument("bench --ab " + s.name_ + ": " + active + " and its bodies are what runs already");
    }
    s.description_ = "Highway target " + variant_active + " with the bodies a CPU of that class runs";
  } else {
    return InvalidArgument("bench --ab: unknown switch '" + s.name_ +
                           "'; expected l1-prefetch, vnni, avx-vnni, amx, dotprod, i8mm, int4-x16 or simd=TARGET");
  }
  return s;
}

Status AbSwitch::Select(bool variant) const {
  if (kind_ == Kind::kSimdTarget) {
    SLM_RETURN_IF_ERROR(kernels::SelectSimdTarget(variant ? variant_target_ : default_target_is_best_ ? "best" : default_target_));
    if (variant) return Status::Ok();  // SelectSimdTarget set the bodies of that target's class
  }
  Bodies b = defaults_;
  if (variant) {
    switch (kind_) {
      case Kind::kL1Prefetch: b.l1_prefetch = false; break;
      case Kind::kVnni: b.vnni = b.avx_vnni = b.amx = false; break;
      case Kind::kAvxVnni: b.avx_vnni = false; break;
      case Kind::kAmx: b.amx = false; break;
      case Kind::kDotprod: b.dotprod = b.i8mm = false; break;
      case Kind::kI8mm: b.i8mm = false; break;
      case Kind::kInt4X16: b.int4_x16 = !defaults_.int4_x16; break;
      case Kind::kSimdTarget: break;
    }
  }
  Restore(b);
  return Status::Ok();
}

}  // namespace slm::llm
