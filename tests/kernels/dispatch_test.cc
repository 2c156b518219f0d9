// The SIMD target machinery itself: the list of targets, forcing one, and restoring the best.
#include <gtest/gtest.h>

#include <string>

#include "hwy/targets.h"
#include "kernels/kernels.h"

namespace slm::kernels {
namespace {

TEST(SimdDispatchTest, ListsAtLeastOneTargetBestFirst) {
  const auto& targets = SupportedSimdTargets();
  ASSERT_FALSE(targets.empty());
  for (size_t i = 1; i < targets.size(); ++i) {
    EXPECT_LT(targets[i - 1], targets[i]) << "Highway orders better targets at lower bits";
  }
}

TEST(SimdDispatchTest, ForcingATargetSwitchesDispatchAndZeroRestoresTheBest) {
  for (int64_t target : SupportedSimdTargets()) {
    ForceSimdTargetForTest(target);
    EXPECT_STREQ(ActiveSimdTarget(), hwy::TargetName(target));
  }
  ForceSimdTargetForTest(0);
  EXPECT_STREQ(ActiveSimdTarget(), hwy::TargetName(SupportedSimdTargets().front()));
}

#if defined(__x86_64__)
TEST(SimdDispatchTest, X86CompilesMoreThanOneTarget) {
  // Dynamic dispatch must not have collapsed to the baseline (e.g. through -march flags).
  EXPECT_GE(SupportedSimdTargets().size(), 2u) << "best: " << ActiveSimdTarget();
}
#endif

}  // namespace
}  // namespace slm::kernels
