// The build switches of the Arm dot-product bodies (matmul_q_dotprod.cc, matmul_q_dotprod_panel.cc):
// intrinsics in a function-level target (armv8.2-a+dotprod) on aarch64 Linux, chosen at run time
// from HWCAP_ASIMDDP; Highway 1.0.3 has no op for `sdot`.
#pragma once

#if defined(__aarch64__) && defined(__linux__)
#define SLM_HAVE_DOTPROD_KERNELS 1
#include <arm_neon.h>
#define SLM_DOTPROD_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#else
#define SLM_HAVE_DOTPROD_KERNELS 0
#endif
