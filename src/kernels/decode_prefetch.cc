// Which cache the int8 weight-only decode tile prefetches into (decode_prefetch.h).
#include "kernels/decode_prefetch.h"

#include <unistd.h>

#include "kernels/cpu_feature.h"

namespace slm::kernels {

bool L1HoldsQ8DecodePrefetch(long bytes, long ways) { return ways >= 12 && bytes >= 48 * 1024; }

namespace {
bool DetectL1HoldsQ8DecodePrefetch() {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL1_DCACHE_ASSOC)
  // glibc reads these from CPUID on x86; elsewhere it may answer 0 or -1 (unknown).
  return L1HoldsQ8DecodePrefetch(sysconf(_SC_LEVEL1_DCACHE_SIZE), sysconf(_SC_LEVEL1_DCACHE_ASSOC));
#else
  return false;
#endif
}
CpuFeature l1_decode_prefetch(DetectL1HoldsQ8DecodePrefetch, "SLM_DISABLE_L1_DECODE_PREFETCH");
}  // namespace

bool Q8DecodePrefetchIntoL1() { return l1_decode_prefetch.Available(); }
void SetQ8DecodePrefetchIntoL1EnabledForTest(bool enabled) { l1_decode_prefetch.SetEnabledForTest(enabled); }

}  // namespace slm::kernels
