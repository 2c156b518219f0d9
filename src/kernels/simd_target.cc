// Which Highway target the kernels dispatch to, and the test hook that forces one.
// Compiled for every target like the kernels, so HWY_DYNAMIC_DISPATCH here resolves exactly as
// it does in matmul.cc & co (all kernel TUs share HWY_TARGETS and hwy's global ChosenTarget).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd_target.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

int64_t CompiledTarget() { return HWY_TARGET; }

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cctype>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"

namespace slm::kernels {

HWY_EXPORT(CompiledTarget);

const char* ActiveSimdTarget() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CompiledTarget)()); }

const char* BestSimdTarget() {
  const std::vector<int64_t>& targets = SupportedSimdTargets();
  return targets.empty() ? ActiveSimdTarget() : hwy::TargetName(targets.front());
}

const char* ActiveIntrinsicBodies() {
  if (VnniAvailable() && AmxAvailable()) return "VNNI+AMX";
  if (VnniAvailable()) return "VNNI";
  if (AvxVnniAvailable()) return "AVX-VNNI";
  if (I8mmAvailable()) return "DOTPROD+I8MM";
  if (DotprodAvailable()) return "DOTPROD";
  return "";
}

const std::vector<int64_t>& SupportedSimdTargets() {
  // SupportedAndGeneratedTargets() intersects with this TU's HWY_TARGETS, i.e. what was compiled.
  static const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
}

void ForceSimdTargetForTest(int64_t target) {
  (void)SupportedSimdTargets();  // pin the real list before the mock hides it
  // Also resets hwy's ChosenTarget, so the next HWY_DYNAMIC_DISPATCH re-selects.
  hwy::SetSupportedTargetsForTest(target);
}

Status SelectSimdTarget(std::string_view name) {
  std::string want(name);
  for (char& c : want) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (want == "BEST") {
    ForceSimdTargetForTest(0);
    SetVnniEnabledForTest(true);
    SetAmxEnabledForTest(true);
    SetAvxVnniEnabledForTest(true);
    SetDotprodEnabledForTest(true);
    SetI8mmEnabledForTest(true);
    return Status::Ok();
  }
  std::string supported;
  for (int64_t target : SupportedSimdTargets()) {
    if (want == hwy::TargetName(target)) {
      ForceSimdTargetForTest(target);
      // The intrinsics bodies a CPU of that class would run: AVX-512 VNNI with AVX3, AVX-VNNI
      // (Alder Lake and later client cores) with AVX2, neither below; on Arm the dot product.
      SetVnniEnabledForTest(target == HWY_AVX3 || target == HWY_AVX3_DL);
      // AMX: only with "best" (no Highway target of this version stands for an AMX CPU).
      SetAmxEnabledForTest(false);
      SetAvxVnniEnabledForTest(target == HWY_AVX2);
      SetDotprodEnabledForTest(true);  // every Arm core with SVE has it, and most NEON ones
      return Status::Ok();
    }
    supported += std::string(supported.empty() ? "" : ", ") + hwy::TargetName(target);
  }
  return InvalidArgument("SIMD target '" + std::string(name) + "' is not one this CPU supports in this build; " +
                         "supported, best first: " + supported + " (or 'best')");
}

}  // namespace slm::kernels
#endif  // HWY_ONCE
