#include "core/cpu_model.h"

#include <gtest/gtest.h>

namespace slm {
namespace {

TEST(CpuModel, X86NamesTheModelWithItsFamilyAndModelNumbers) {
  const char* text =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
      "model name\t: AMD EPYC 9454 48-Core Processor  \nstepping\t: 1\n\n"
      "processor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: another\n";
  EXPECT_EQ(CpuModelFromCpuinfo(text), "AMD EPYC 9454 48-Core Processor (family 25, model 17)");
}

TEST(CpuModel, ArmGivesImplementerAndPart) {
  const char* text =
      "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd asimddp\nCPU implementer\t: 0x41\n"
      "CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n";
  EXPECT_EQ(CpuModelFromCpuinfo(text), "Arm implementer 0x41, part 0xd0c");
}

TEST(CpuModel, TextWithoutEitherGivesEmpty) {
  EXPECT_EQ(CpuModelFromCpuinfo(""), "");
  EXPECT_EQ(CpuModelFromCpuinfo("processor : 0\nflags : fpu\n\n"), "");
  EXPECT_EQ(CpuModelFromCpuinfo("no colon here\n"), "");
}

TEST(CpuModel, NameWithoutFamilyIsTheNameAlone) {
  EXPECT_EQ(CpuModelFromCpuinfo("model name : Some CPU\n"), "Some CPU");
}

}  // namespace
}  // namespace slm
