// Files changed by another process while loaded (docs/bad-inputs.md, "Files truncated while
// mapped"). Mapped (the default), a file truncated under the loader raises SIGBUS on the next
// touch of a vanished page: the documented contract is that loaded files are never modified in
// place. FileAccess::kRead (SLM_FILE_ACCESS=read) reads the file into private memory at open,
// so a later truncation has no effect, down to generating the same tokens.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/mapped_file.h"
#include "e2e/artifacts.h"
#include "llm/runner.h"
#include "test_util.h"

namespace slm::testing {
namespace {

std::string WritePattern(const std::string& path, size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
  return bytes;
}

// Restores the process default however the test ends.
struct ScopedFileAccess {
  explicit ScopedFileAccess(FileAccess a) : previous(DefaultFileAccess()) { SetDefaultFileAccess(a); }
  ~ScopedFileAccess() { SetDefaultFileAccess(previous); }
  FileAccess previous;
};

TEST(FileAccessRead, TruncatingTheFileAfterOpenLeavesTheBytesIntact) {
  const std::string path = MakeTempDir("access") + "/f.bin";
  const std::string want = WritePattern(path, 3 * 4096 + 17);
  auto f = MappedFile::Open(path, FileAccess::kRead);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  ASSERT_EQ((*f)->size(), want.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->data()), (*f)->size()), want);
  std::filesystem::remove(path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->data()), (*f)->size()), want);
}

TEST(FileAccessRead, GivesTheSameBytesAndErrorsAsMapping) {
  const std::string dir = MakeTempDir("access");
  const std::string want = WritePattern(dir + "/f.bin", 5000);
  auto mapped = MappedFile::Open(dir + "/f.bin", FileAccess::kMap);
  auto read = MappedFile::Open(dir + "/f.bin", FileAccess::kRead);
  ASSERT_TRUE(mapped.ok() && read.ok());
  EXPECT_EQ(0, std::memcmp((*mapped)->data(), (*read)->data(), want.size()));
  std::ofstream(dir + "/empty.bin");
  auto empty = MappedFile::Open(dir + "/empty.bin", FileAccess::kRead);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size(), 0u);
  EXPECT_EQ(MappedFile::Open(dir + "/missing", FileAccess::kRead).status().code(), ErrorCode::kNotFound);
  auto as_dir = MappedFile::Open(dir, FileAccess::kRead);
  EXPECT_EQ(as_dir.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(as_dir.status().message().find("is a directory"), std::string::npos) << as_dir.status().ToString();
}

TEST(FileAccessReadDeathTest, EnvironmentVariableSelectsReadingAndTheSetterOverridesIt) {
  // The variable is read once per process, at the first use: checked in a fresh child process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("SLM_FILE_ACCESS", "read", 1);
  EXPECT_EXIT(
      {
        const bool from_env = DefaultFileAccess() == FileAccess::kRead;
        SetDefaultFileAccess(FileAccess::kMap);
        std::_Exit(from_env && DefaultFileAccess() == FileAccess::kMap ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("SLM_FILE_ACCESS");
}

// The contract in the default (mapped) mode, demonstrated: truncation under a live mapping
// kills the process on the next touch of a vanished page. Run in a death-test child.
TEST(FileAccessMapDeathTest, TruncatingAMappedFileRaisesSigbusOnTouch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = MakeTempDir("access") + "/f.bin";
  WritePattern(path, 4 * 4096);
  EXPECT_DEATH(
      {
        auto f = MappedFile::Open(path, FileAccess::kMap);
        if (!f.ok()) std::abort();
        if (::truncate(path.c_str(), 0) != 0) std::abort();
        volatile uint8_t sink = (*f)->data()[3 * 4096];
        (void)sink;
        std::fprintf(stderr, "survived\n");
        std::_Exit(0);
      },
      "");
}

// A whole artifact loaded with FileAccess::kRead generates the same tokens after its file was
// truncated to nothing as before.
TEST(FileAccessRead, ArtifactTruncatedAfterLoadStillGeneratesTheSameTokens) {
  const std::string src = CompiledArtifact(SharedDir() + "/models/stories260K", {8}, 48);
  const std::string copy = MakeTempDir("access") + "/m.slm";
  std::filesystem::copy_file(src, copy);
  auto generate = [](llm::Runner& r) {
    llm::GenerateOptions o;
    o.max_new_tokens = 20;
    o.stop_on_eos = false;
    const std::vector<int32_t> prompt = {1, 403, 407};
    auto out = r.Generate(prompt, o);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->generated : std::vector<int32_t>{};
  };
  auto reference = llm::Runner::Load(src);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  const std::vector<int32_t> want = generate(**reference);
  ASSERT_FALSE(want.empty());

  std::unique_ptr<llm::Runner> runner;
  {
    ScopedFileAccess guard(FileAccess::kRead);
    auto r = llm::Runner::Load(copy);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner = std::move(r).value();
  }
  ASSERT_EQ(::truncate(copy.c_str(), 0), 0);
  EXPECT_EQ(generate(*runner), want);
}

}  // namespace
}  // namespace slm::testing
