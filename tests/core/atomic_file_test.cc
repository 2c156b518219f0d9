// AtomicFileWriter: a committed file holds what was written and is not left in the page cache
// (its pages were allocated while the writer ran; a later read brings them back contiguous).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "test_util.h"

namespace slm {
namespace {

constexpr long kTmpfsMagic = 0x01021994;  // linux/magic.h TMPFS_MAGIC: the page cache is the storage
constexpr long kRamfsMagic = 0x858458f6;

// Pages of `path` resident in the page cache, counted by mapping it and asking mincore (which
// does not fault pages in).
size_t ResidentPages(const std::string& path, size_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return size_t(-1);
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return size_t(-1);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE)), pages = (bytes + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  size_t resident = 0;
  if (::mincore(p, bytes, vec.data()) == 0) {
    for (unsigned char v : vec) resident += v & 1;
  } else {
    resident = size_t(-1);
  }
  ::munmap(p, bytes);
  return resident;
}

TEST(AtomicFileWriter, CommittedFileHoldsTheBytesAndLeavesThePageCache) {
  const std::string dir = testing::MakeTempDir("atomic");
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir.c_str(), &fs), 0);
  const std::string path = dir + "/out.bin";
  constexpr size_t kBytes = 8 << 20;  // several of the writer's 1 MB flushes
  std::vector<char> data(kBytes);
  for (size_t i = 0; i < kBytes; ++i) data[i] = char(i * 2654435761u >> 13);
  {
    auto w = AtomicFileWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->Write(data.data(), kBytes).ok());
    ASSERT_TRUE(w->Commit().ok());
  }
  if (fs.f_type != kTmpfsMagic && fs.f_type != kRamfsMagic) {
    // Written pages before the fix: all 2048 resident.
    EXPECT_EQ(ResidentPages(path, kBytes), 0u) << "the committed file's pages stayed in the page cache";
  }
  EXPECT_TRUE(testing::ReadFile(path) == std::string(data.begin(), data.end()));
}

}  // namespace
}  // namespace slm
