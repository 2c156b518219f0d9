// Faults while writing and reading: a process killed at any point of writing an output leaves
// either nothing or a complete, valid file under the final name (never a truncated one); a
// file that changes under the reader between loads gives an error, not a partial program.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "e2e/artifacts.h"
#include "io/artifact_reader.h"
#include "llm/runner.h"
#include "llm/session_snapshot.h"
#include "runtime/program.h"

namespace slm::testing {
namespace {

namespace fs = std::filesystem;

// Starts `staticlm <args...>` (stdout/stderr to /dev/null); returns its pid.
pid_t SpawnCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {CliPath()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for `pid`; returns true when it exited normally with status 0.
bool Reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The file under the final name is absent, or a complete artifact whose weights hash right.
void ExpectAbsentOrValidArtifact(const std::string& path, const std::string& context) {
  if (!fs::exists(path)) return;
  auto a = io::ArtifactFile::Open(path);
  ASSERT_TRUE(a.ok()) << context << ": " << a.status().ToString();
  EXPECT_TRUE((*a)->VerifyConstantHashes().ok()) << context;
}

// Kills `staticlm compile` after random delays spread over one whole compile (measured first,
// so every phase is hit: spec, checkpoint, graph, weight streaming, fsync, rename).
TEST(Fault, CompileKilledAtRandomPointsLeavesNoTruncatedArtifact) {
  const std::string dir = MakeTempDir("fault");
  const std::string out = dir + "/m.slm";
  const std::vector<std::string> args = {"compile", SharedDir() + "/models/stories260K", "-o", out,
                                         "--max-context", "32", "--prefill-step", "8"};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Reap(SpawnCli(args)));
  const auto full = std::chrono::steady_clock::now() - start;
  ExpectAbsentOrValidArtifact(out, "uninterrupted compile");
  ASSERT_TRUE(fs::exists(out));

  std::mt19937 rng(6);
  const int64_t full_us = std::chrono::duration_cast<std::chrono::microseconds>(full).count();
  for (int i = 0; i < 12; ++i) {
    // Half the runs start from no file, half overwrite the previous artifact.
    if (i % 2 == 0) fs::remove(out);
    const pid_t pid = SpawnCli(args);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % (full_us + 1)));
    ::kill(pid, SIGKILL);
    Reap(pid);
    ExpectAbsentOrValidArtifact(out, "compile killed in run " + std::to_string(i));
  }
  // What a killed writer leaves is its temp file, never the final name; a later compile works.
  ASSERT_TRUE(Reap(SpawnCli(args)));
  ExpectAbsentOrValidArtifact(out, "compile after the kills");
}

// Kills a process that keeps overwriting one session snapshot.
TEST(Fault, SnapshotWriterKilledAtRandomPointsLeavesNoTruncatedSnapshot) {
  const std::string artifact = CompiledArtifact(SharedDir() + "/models/stories260K", {4}, 16);
  auto runner = llm::Runner::Load(artifact);
  ASSERT_TRUE(runner.ok());
  std::vector<float> logits((*runner)->metadata().vocab_size);
  const int32_t ids[5] = {1, 403, 407, 261, 30};
  ASSERT_TRUE((*runner)->session().Feed(ids, logits).ok());
  const std::string path = MakeTempDir("fault") + "/s.snap";

  std::mt19937 rng(7);
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {  // the child only writes (no threads are used by SaveSnapshot)
      for (;;) {
        if (!(*runner)->session().SaveSnapshot(path).ok()) ::_exit(1);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 5000));
    ::kill(pid, SIGKILL);
    Reap(pid);
    if (fs::exists(path)) {
      auto snap = llm::ReadSessionSnapshot(path);
      EXPECT_TRUE(snap.ok()) << "run " << i << ": " << snap.status().ToString();
      if (snap.ok()) {
        EXPECT_EQ(snap->history.size(), 5u);
      }
    }
  }
}

// The artifact changes between two loads (truncated by another process): the second load is
// an error naming the file, not a program over missing bytes.
TEST(Fault, ArtifactTruncatedAfterALoadIsRefusedByTheNextLoad) {
  const std::string dir = MakeTempDir("fault");
  const std::string path = dir + "/m.slm";
  fs::copy_file(CompiledArtifact(SharedDir() + "/models/stories260K", {4}, 16), path);
  auto first = runtime::Program::Load(path);
  ASSERT_TRUE(first.ok());
  const uint64_t size = fs::file_size(path);
  first->reset();  // a mapping of bytes that vanish would fault on access (see docs/bad-inputs.md)
  for (uint64_t cut : {size - 1, size / 2, uint64_t{100}, uint64_t{0}}) {
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(cut)), 0);
    auto again = runtime::Program::Load(path);
    ASSERT_FALSE(again.ok()) << "loaded an artifact truncated to " << cut << " bytes";
    EXPECT_NE(again.status().message().find(path), std::string::npos) << again.status().ToString();
  }
}

}  // namespace
}  // namespace slm::testing
