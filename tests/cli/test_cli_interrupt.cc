// Interrupting `oasr quantize` ([W2-Q]): SIGINT / SIGTERM while the
// checkpoint is being written leaves neither the destination nor its
// DST.tmp-* staging folder, and the process still dies of the signal. The
// test watches the destination's parent and signals the moment the staging
// folder appears (the write phase), and also at fixed delays (load,
// quantization, write, done), checking after each run that the folder holds
// the finished checkpoint or nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_test_util.h"
#include "support/test_support.h"

namespace oasr::testing {
namespace {

namespace fs = std::filesystem;
const std::string kModel = std::string(OASR_SOURCE_DIR) + "/models/oasr-u2pp-char-8k";

pid_t spawn_quantize(const fs::path& destination) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(OASR_CLI_BINARY, OASR_CLI_BINARY, "quantize", kModel.c_str(), destination.c_str(),
            "--recipe", "int8_w8a8_rtn", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

std::string listing(const fs::path& parent) {
  std::string names;
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(parent, error)) {
    names += " " + fs::relative(entry.path(), parent).string();
  }
  return names;
}

bool has_staging_sibling(const fs::path& parent) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename();
    if (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// What the parent folder holds after a run: nothing, or the whole checkpoint.
void expect_whole_or_nothing(const fs::path& parent, const fs::path& destination,
                             const std::string& where) {
  EXPECT_FALSE(has_staging_sibling(parent)) << where << "; left:" << listing(parent);
  if (fs::exists(destination)) {
    EXPECT_TRUE(fs::is_regular_file(destination / "oasr_config.json")) << where;
    EXPECT_TRUE(fs::is_regular_file(destination / "model.safetensors")) << where;
    const CliResult info = run_oasr({"info", "--summary", destination.string()});
    EXPECT_EQ(info.exit_code, 0) << where << ": " << info.err;
  }
}

int wait_for(pid_t pid, bool* signaled) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  *signaled = WIFSIGNALED(status);
  return *signaled ? WTERMSIG(status) : WEXITSTATUS(status);
}

TEST(CliInterrupt, ASignalDuringTheWriteLeavesNoStagingFolder) {
  int caught = 0;
  for (int attempt = 0; attempt < 20 && caught < 3; ++attempt) {
    const TempDir dir;
    const fs::path destination = dir.path() / "q";
    const int signal = attempt % 2 == 0 ? SIGINT : SIGTERM;
    const pid_t pid = spawn_quantize(destination);
    bool sent = false;
    while (!sent) {
      if (has_staging_sibling(dir.path())) {
        ::kill(pid, signal);
        sent = true;
        break;
      }
      if (::waitpid(pid, nullptr, WNOHANG) == pid) break;  // finished before we saw it
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!sent) {
      expect_whole_or_nothing(dir.path(), destination, "unsignalled run");
      continue;
    }
    bool signaled = false;
    const int code = wait_for(pid, &signaled);
    // A signal that lands after the rename leaves the finished checkpoint.
    if (signaled) {
      EXPECT_EQ(code, signal);
      ++caught;
    }
    expect_whole_or_nothing(dir.path(), destination,
                            "signal " + std::to_string(signal) + (signaled ? " (died of it)" : "") +
                                ", status " + std::to_string(code));
    if (signaled) {
      EXPECT_FALSE(fs::exists(destination)) << "interrupted, yet the result is there";
    }
  }
  std::cout << "interrupted " << caught << " runs in their write phase\n";
  EXPECT_GE(caught, 1) << "no run was interrupted while writing (the write phase was never seen)";
}

TEST(CliInterrupt, ASignalAtAnyMomentLeavesTheWholeCheckpointOrNothing) {
  for (const int delay_ms : {0, 20, 50, 100, 150, 200, 300, 400, 600, 1000}) {
    const TempDir dir;
    const fs::path destination = dir.path() / "q";
    const pid_t pid = spawn_quantize(destination);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGINT);
    bool signaled = false;
    wait_for(pid, &signaled);
    expect_whole_or_nothing(dir.path(), destination,
                            "SIGINT after " + std::to_string(delay_ms) + " ms");
  }
}

}  // namespace
}  // namespace oasr::testing
