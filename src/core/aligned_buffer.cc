#include "core/aligned_buffer.h"

namespace slm {

Allocator& DefaultAllocator() {
  static AlignedHeapAllocator allocator;
  return allocator;
}

}  // namespace slm
