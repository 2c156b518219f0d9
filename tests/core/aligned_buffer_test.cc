// The default allocator: small buffers from the heap, large ones from anonymous mappings that are
// zero without being written (so a session's caches cost nothing until used).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "core/aligned_buffer.h"

namespace slm {
namespace {

// Resident set size in bytes, from /proc/self/statm.
size_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

bool AllZero(const Buffer& b) {
  for (size_t i = 0; i < b.size(); ++i) if (b.data()[i] != 0) return false;
  return true;
}

TEST(AlignedBuffer, SmallAndLargeBuffersAreZeroedAndAligned) {
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{4096}, AlignedHeapAllocator::kMapThreshold - 1,
                       AlignedHeapAllocator::kMapThreshold, AlignedHeapAllocator::kMapThreshold + 12345}) {
    Buffer b = Buffer::Allocate(bytes);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kBufferAlignment, 0u) << bytes;
    EXPECT_TRUE(AllZero(b)) << bytes;
    b.data()[bytes - 1] = 7;  // the whole size is writable
  }
}

TEST(AlignedBuffer, LargeAlignmentsBeyondAPageAreHonoured) {
  AlignedHeapAllocator a;
  for (size_t alignment : {size_t{64}, size_t{4096}, size_t{1} << 16, size_t{1} << 21}) {
    for (size_t bytes : {size_t{100}, AlignedHeapAllocator::kMapThreshold * 3 + 5}) {
      void* p = a.AllocateZeroed(bytes, alignment);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u) << alignment << " " << bytes;
      static_cast<uint8_t*>(p)[bytes - 1] = 1;
      a.Free(p, bytes);
    }
  }
}

TEST(AlignedBuffer, ALargeBufferIsNotMadeResidentUntilWritten) {
  const size_t bytes = size_t{256} << 20;
  const size_t before = ResidentBytes();
  Buffer b = Buffer::Allocate(bytes);
  EXPECT_LT(ResidentBytes(), before + bytes / 8) << "allocation touched the pages";
  EXPECT_EQ(b.data()[bytes / 2], 0);
}

}  // namespace
}  // namespace slm
