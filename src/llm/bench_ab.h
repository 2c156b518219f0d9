// `staticlm bench --ab SWITCH`: one runtime switch of the kernels' dispatch, flipped between the
// two halves of every paired repeat, so that a variant and the default run in one process, one
// right after the other. On a shared VM whose bandwidth drifts by tens of percent within minutes
// (docs/benchmarks.md), two runs of separate processes compare minutes, not code; a ratio of
// repeats taken a second apart compares code.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace slm::llm {

class AbSwitch {
 public:
  // SWITCH (case-sensitive):
  //   l1-prefetch   the int8 weight-only decode tile prefetches into L2 instead of L1
  //   vnni          no AVX-512 VNNI / AVX-VNNI bodies (the Highway bodies instead)
  //   avx-vnni      no AVX-VNNI bodies
  //   amx           no AMX panels (the VNNI panels instead)
  //   dotprod       no Arm dot-product bodies
  //   i8mm          no Arm smmla panels (sdot instead)
  //   int4-x16      the int4 decode's 16-bit x tile on (off where SLM_INT4_X16 turned it on);
  //                 x86 AVX2 without VNNI only (kernels/quant_kernels.h, Int4DecodeX16Enabled)
  //   simd=TARGET   the Highway target TARGET (as --simd-target names it) instead of the active one
  // InvalidArgument for any other name, and when the switch changes nothing on this CPU and build
  // (a feature it lacks or has switched off, the target already active).
  static Result<AbSwitch> Parse(std::string_view spec);

  // Selects the variant (true) or what was in use when Parse ran (false).
  Status Select(bool variant) const;
  const std::string& name() const { return name_; }
  // What the variant runs, for reports: "AVX-512 VNNI and AVX-VNNI bodies off".
  const std::string& description() const { return description_; }

 private:
  enum class Kind { kL1Prefetch, kVnni, kAvxVnni, kAmx, kDotprod, kI8mm, kInt4X16, kSimdTarget };
  // Which of the switchable bodies were in use when Parse ran: what Select(false) puts back.
  struct Bodies {
    bool l1_prefetch = false, vnni = false, avx_vnni = false, amx = false, dotprod = false, i8mm = false;
    bool int4_x16 = false;
  };
  void Restore(const Bodies& b) const;

  Kind kind_ = Kind::kL1Prefetch;
  std::string name_, description_;
  Bodies defaults_;
  bool default_target_is_best_ = true;
  std::string default_target_, variant_target_;  // kSimdTarget
};

}  // namespace slm::llm
