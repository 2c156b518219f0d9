// The SIMD target machinery itself: the list of targets, forcing one, selecting one by name, and
// restoring the best.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/roofline.h"
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

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
    EXPECT_STREQ(BestSimdTarget(), hwy::TargetName(SupportedSimdTargets().front())) << "whatever runs now";
  }
  ForceSimdTargetForTest(0);
  EXPECT_STREQ(ActiveSimdTarget(), hwy::TargetName(SupportedSimdTargets().front()));
  EXPECT_STREQ(BestSimdTarget(), ActiveSimdTarget());
}

TEST(SimdDispatchTest, SelectingATargetByNameIgnoresCaseKeepsVnniOnlyForAvx3AndBestRestores) {
  const auto& targets = SupportedSimdTargets();
  const bool vnni_cpu = VnniAvailable();
  for (int64_t target : targets) {
    std::string name = hwy::TargetName(target);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    ASSERT_TRUE(SelectSimdTarget(name).ok()) << name;
    EXPECT_STREQ(ActiveSimdTarget(), hwy::TargetName(target));
    EXPECT_EQ(VnniAvailable(), vnni_cpu && (target == HWY_AVX3 || target == HWY_AVX3_DL)) << name;
  }
  ASSERT_TRUE(SelectSimdTarget("best").ok());
  EXPECT_STREQ(ActiveSimdTarget(), hwy::TargetName(targets.front()));
  EXPECT_EQ(VnniAvailable(), vnni_cpu);
}

TEST(SimdDispatchTest, ActiveIntrinsicBodiesNamesTheFamilyTheDispatchTakes) {
  const bool vnni = VnniAvailable(), avx_vnni = AvxVnniAvailable(), dotprod = DotprodAvailable();
  const std::string expected = vnni && AmxAvailable() ? "VNNI+AMX"
                               : vnni           ? "VNNI"
                               : avx_vnni       ? "AVX-VNNI"
                               : I8mmAvailable() ? "DOTPROD+I8MM"
                               : dotprod        ? "DOTPROD"
                                                : "";
  EXPECT_EQ(ActiveIntrinsicBodies(), expected);
  if (I8mmAvailable()) {  // smmla off: the sdot panels
    SetI8mmEnabledForTest(false);
    EXPECT_STREQ(ActiveIntrinsicBodies(), "DOTPROD");
    SetI8mmEnabledForTest(true);
  }
  SetVnniEnabledForTest(false);
  SetAvxVnniEnabledForTest(false);
  SetDotprodEnabledForTest(false);
  EXPECT_STREQ(ActiveIntrinsicBodies(), "");
  SetVnniEnabledForTest(true);
  SetAvxVnniEnabledForTest(true);
  SetDotprodEnabledForTest(true);
  EXPECT_EQ(ActiveIntrinsicBodies(), expected);
}

// bench's int8 peak names the instruction it probes, the one the dynamic prefill dispatches to.
TEST(SimdDispatchTest, Int8PeakInstructionFollowsTheIntrinsicBodies) {
  const std::string bodies = ActiveIntrinsicBodies();
  // With AMX the prefill products' tiles are tdpbssd, probed apart (MeasureAmxInt8Peak); decode
  // and the columns the AMX panels leave stay on vpdpbusd, the int8 peak bench reports first.
  const std::string expected = bodies == "VNNI" || bodies == "VNNI+AMX" ? "vpdpbusd"
                               : bodies == "AVX-VNNI"     ? "vpdpbusd (256-bit, AVX-VNNI)"
                               : bodies == "DOTPROD+I8MM" ? "smmla"
                               : bodies == "DOTPROD"      ? "sdot"
                                                          : "int16 multiply-add";
  EXPECT_EQ(Int8PeakInstruction(), expected);
  SetVnniEnabledForTest(false);
  SetAvxVnniEnabledForTest(false);
  SetDotprodEnabledForTest(false);
  EXPECT_STREQ(Int8PeakInstruction(), "int16 multiply-add");
  SetVnniEnabledForTest(true);
  SetAvxVnniEnabledForTest(true);
  SetDotprodEnabledForTest(true);
}

// The int16 probe counts the multiply-adds it executes: one vpmaddwd does twice the int8 OPs of
// one f32 FMA, and no CPU issues more of them per cycle than FMAs, so its rate stays within 2x
// the FMA peak (Zen 2: 1x). Not a speed requirement — a check that the loop is not optimised
// away: when its operands were loop-invariant, GCC hoisted the multiply-adds and the probe read
// 8x the FMA peak (thirty-sixth session). The bound leaves 2x for timing noise.
TEST(SimdDispatchTest, Int16ProbeTimesItsMultiplyAddsNotOnlyTheirSums) {
  SetVnniEnabledForTest(false);
  SetAvxVnniEnabledForTest(false);
  SetDotprodEnabledForTest(false);
  ASSERT_STREQ(Int8PeakInstruction(), "int16 multiply-add");
  ThreadPool pool(1);
  const double int8 = MeasureInt8DotPeak(pool, 0.05), fma = MeasureF32FmaPeak(pool, 0.05);
  SetVnniEnabledForTest(true);
  SetAvxVnniEnabledForTest(true);
  SetDotprodEnabledForTest(true);
  EXPECT_GT(int8, 0.0);
  EXPECT_LE(int8, 4.0 * fma) << "int16 probe " << int8 / 1e9 << " GOP/s, f32 FMA " << fma / 1e9 << " GFLOP/s";
}

// `--simd-target X` runs what a CPU of class X runs: no AMX (no Highway target of this version
// stands for an AMX CPU); "best" brings it back where the CPU has it.
TEST(SimdDispatchTest, AnExplicitTargetTurnsAmxOffAndBestTurnsItBackOn) {
  if (!AmxAvailable()) GTEST_SKIP() << "no AMX-INT8 on this CPU / build";
  ASSERT_TRUE(SelectSimdTarget(hwy::TargetName(SupportedSimdTargets().front())).ok());
  EXPECT_FALSE(AmxAvailable());
  EXPECT_STREQ(ActiveIntrinsicBodies(), "VNNI");
  ASSERT_TRUE(SelectSimdTarget("best").ok());
  EXPECT_TRUE(AmxAvailable());
  EXPECT_STREQ(ActiveIntrinsicBodies(), "VNNI+AMX");
}

TEST(SimdDispatchTest, SelectingAnUnsupportedTargetFailsListingTheSupportedOnesAndChangesNothing) {
  const std::string before = ActiveSimdTarget();
  for (const char* name : {"AVX9", "", "AVX2 "}) {
    const Status s = SelectSimdTarget(name);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << name;
    EXPECT_THAT(s.message(), ::testing::HasSubstr("'" + std::string(name) + "'"));
    EXPECT_THAT(s.message(), ::testing::HasSubstr(hwy::TargetName(SupportedSimdTargets().front())));
    EXPECT_EQ(ActiveSimdTarget(), before);
  }
}

#if defined(__aarch64__)
TEST(SimdDispatchTest, Arm64CompilesTheSveTargetsAndUsesThemWhereTheCpuHasSve) {
  // HWY_TARGETS: what this build compiles (HWY_DISABLED_TARGETS applied).
  EXPECT_NE(HWY_TARGETS & HWY_SVE, 0);
  EXPECT_NE(HWY_TARGETS & HWY_SVE2, 0);
  EXPECT_NE(HWY_TARGETS & HWY_SVE_256, 0);
  EXPECT_NE(HWY_TARGETS & HWY_SVE2_128, 0);
#if defined(__linux__)
  if ((getauxval(AT_HWCAP) & HWCAP_SVE) == 0) GTEST_SKIP() << "this CPU has no SVE";
  const auto& targets = SupportedSimdTargets();
  EXPECT_NE(std::find(targets.begin(), targets.end(), int64_t{HWY_SVE}), targets.end());
#endif
}
#endif

#if defined(__x86_64__)
TEST(SimdDispatchTest, X86CompilesMoreThanOneTarget) {
  // Dynamic dispatch must not have collapsed to the baseline (e.g. through -march flags).
  EXPECT_GE(SupportedSimdTargets().size(), 2u) << "best: " << ActiveSimdTarget();
}
#endif

}  // namespace
}  // namespace slm::kernels
