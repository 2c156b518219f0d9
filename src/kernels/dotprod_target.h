// The build switches of the Arm dot-product bodies (matmul_q_dotprod.cc, matmul_q_dotprod_panel.cc,
// matmul_split_x_dotprod.cc): intrinsics in function-level targets on aarch64 Linux, chosen at
// run time from HWCAP_ASIMDDP (and HWCAP2_I8MM); Highway 1.0.3 has no op for `sdot` or `smmla`.
#pragma once

#if defined(__aarch64__) && defined(__linux__)
#define SLM_HAVE_DOTPROD_KERNELS 1
#include <arm_neon.h>
#define SLM_DOTPROD_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
// The int8 matrix multiply (`smmla`, FEAT_I8MM: Cortex-A510 / A710 / X2 and later, Apple M2 and
// later), chosen at run time from HWCAP2_I8MM.
#define SLM_I8MM_TARGET __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#else
#define SLM_HAVE_DOTPROD_KERNELS 0
#endif
