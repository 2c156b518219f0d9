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
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"

namespace slm::kernels {

HWY_EXPORT(CompiledTarget);

const char* ActiveSimdTarget() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CompiledTarget)()); }

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

}  // namespace slm::kernels
#endif  // HWY_ONCE
