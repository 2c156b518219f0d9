// MappedFile asks for huge pages for files of 2 MB and more, mapped or read (the weights are
// streamed whole for every token; see mapped_file.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/mapped_file.h"
#include "test_util.h"

namespace slm {
namespace {

// A file of `bytes` pattern bytes (byte i = i·131 + 7) in a fresh temp dir.
std::string PatternFile(const std::string& name, size_t bytes) {
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = char(i * 131 + 7);
  const std::string path = testing::MakeTempDir("mapped") + "/" + name;
  testing::WriteFile(path, data);
  return path;
}

// The VmFlags line of the /proc/self/smaps entry whose range holds `p` ("" if none).
std::string VmFlagsOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmFlags:", 0) == 0) {
      if (inside) return line;
      continue;
    }
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') inside = begin <= a && a < end;
  }
  return "";
}

bool HasFlag(const std::string& vm_flags, const std::string& flag) {
  std::istringstream in(vm_flags);
  for (std::string f; in >> f;) if (f == flag) return true;
  return false;
}

TEST(MappedFile, LargeFilesAskForHugePagesMappedOrRead) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) {
    GTEST_SKIP() << "kernel without transparent huge pages";
  }
  const std::string big = PatternFile("big.bin", size_t{4} << 20), small = PatternFile("small.bin", size_t{64} << 10);
  for (FileAccess access : {FileAccess::kMap, FileAccess::kRead}) {
    auto f = MappedFile::Open(big, access);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const std::string flags = VmFlagsOf((*f)->data());
    ASSERT_FALSE(flags.empty());
    EXPECT_TRUE(HasFlag(flags, "hg")) << (access == FileAccess::kMap ? "mapped: " : "read: ") << flags;
    auto s = MappedFile::Open(small, access);
    ASSERT_TRUE(s.ok());
    EXPECT_FALSE(HasFlag(VmFlagsOf((*s)->data()), "hg")) << "a 64 KB file needs no 2 MB pages";
    EXPECT_EQ((*f)->data()[12345], uint8_t(char(12345 * 131 + 7)));
  }
}

TEST(MappedFile, ResidencyCountsTheTouchedPagesOfTheMapping) {
  const size_t size = (size_t{3} << 20) + 4321;
  const std::string path = PatternFile("resident.bin", size);
  for (FileAccess access : {FileAccess::kMap, FileAccess::kRead}) {
    auto f = MappedFile::Open(path, access);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    uint64_t sum = 0;
    for (size_t i = 0; i < size; i += 4096) sum += (*f)->data()[i];  // every page resident
    EXPECT_GT(sum, 0u);
    const MappingResidency r = ResidencyOf((*f)->data(), size);
    // smaps counts whole mappings: a read file's buffer may share its mapping with other memory.
    EXPECT_GE(r.resident_bytes, size) << (access == FileAccess::kMap ? "mapped" : "read");
    EXPECT_LE(r.huge_page_bytes, r.resident_bytes);
  }
  // No mapping there.
  const MappingResidency none = ResidencyOf(nullptr, 4096);
  EXPECT_EQ(none.resident_bytes, 0u);
  EXPECT_EQ(none.huge_page_bytes, 0u);
}

}  // namespace
}  // namespace slm
