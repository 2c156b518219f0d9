// The CPU this process runs on, in words, for benchmark reports: the same artifact and build
// read very differently on two CPUs of one ISA (docs/benchmarks.md, fifteenth table: a Zen 4 runs
// the AVX-512 bodies at half a Zen 5's peaks and streams decode differently), so a figure without
// the CPU it was measured on cannot be compared.
#pragma once

#include <string>
#include <string_view>

namespace slm {

// From the text of /proc/cpuinfo: x86 "<model name> (family F, model M)", e.g. "AMD EPYC
// (family 25, model 17)"; Arm "Arm implementer 0x41, part 0xd0c" (the kernel gives no name);
// "" when the text has neither. Reads the first processor's block only.
std::string CpuModelFromCpuinfo(std::string_view cpuinfo);

// CpuModelFromCpuinfo of this machine's /proc/cpuinfo; "" where it cannot be read.
std::string CpuModel();

}  // namespace slm
