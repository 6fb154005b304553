// The staged-directory writer (io/staged_directory.h): a directory appears
// whole or not at all, also when the process is interrupted. Each
// interruption runs in a forked child that signals itself in the middle of
// a write; the parent checks how the child died and what it left.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/staged_directory.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A checkpoint-like directory: the marker and one payload file.
void fill(const fs::path& dir, const std::string& payload) {
  write_text(dir / "oasr_config.json", "{}");
  write_text(dir / "payload.txt", payload);
}

// Runs `body` in a child; returns the signal it died of (0: it exited).
int run_child(const std::function<void()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

TEST(StagedDirectory, WritesReplacesAndRefusesByName) {
  const testing::TempDir tmp;
  const fs::path dst = tmp.path() / "ckpt";
  io::write_staged_directory(dst, {}, [](const fs::path& s) { fill(s, "one"); });
  EXPECT_EQ(read_text(dst / "payload.txt"), "one");
  EXPECT_EQ(entries(tmp.path()), std::set<std::string>{"ckpt"});
  try {
    io::write_staged_directory(dst, {}, [](const fs::path& s) { fill(s, "two"); });
    FAIL() << "replaced without force";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass --force"), std::string::npos) << e.what();
  }
  io::StagedDirectoryOptions force;
  force.force = true;
  io::write_staged_directory(dst.string() + "/", force, [](const fs::path& s) { fill(s, "two"); });
  EXPECT_EQ(read_text(dst / "payload.txt"), "two");
  EXPECT_EQ(entries(tmp.path()), std::set<std::string>{"ckpt"});

  // A folder that is not ours is refused at once, with or without force:
  // the first message does not send the user to --force.
  const fs::path home = tmp.path() / "home";
  fs::create_directories(home);
  write_text(home / "notes.txt", "keep me");
  for (const bool with_force : {false, true}) {
    io::StagedDirectoryOptions options;
    options.force = with_force;
    try {
      io::write_staged_directory(home, options, [](const fs::path& s) { fill(s, "x"); });
      FAIL() << "replaced a folder that is not ours";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("not an oasr checkpoint directory"), std::string::npos) << message;
      EXPECT_EQ(message.find("pass --force"), std::string::npos) << message;
    }
  }
  EXPECT_EQ(read_text(home / "notes.txt"), "keep me");
  // A failing write leaves the destination as it was and no sibling.
  EXPECT_THROW(io::write_staged_directory(dst, force,
                                          [](const fs::path& s) {
                                            fill(s, "three");
                                            OASR_THROW(kIo, "disk full (test)");
                                          }),
               Error);
  EXPECT_EQ(read_text(dst / "payload.txt"), "two");
  EXPECT_EQ(entries(tmp.path()), (std::set<std::string>{"ckpt", "home"}));
}

TEST(StagedDirectory, AnInterruptedWriteLeavesNothingAndTheDestinationAsItWas) {
  const testing::TempDir tmp;
  const fs::path dst = tmp.path() / "ckpt";
  io::write_staged_directory(dst, {}, [](const fs::path& s) { fill(s, "old"); });
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(signal);
    const int died_of = run_child([&] {
      io::StagedDirectoryOptions force;
      force.force = true;
      io::write_staged_directory(dst, force, [&](const fs::path& staging) {
        fill(staging, "new");
        // A safetensors file half written inside the staging folder, as
        // oasr quantize's write phase has it when interrupted.
        fs::create_directories(staging / "nested");
        const Tensor t = Tensor::from_vector(std::vector<float>(1000, 1.0f), {1000});
        io::save_safetensors(staging / "model.safetensors", {{"w", t}});
        ::raise(signal);
      });
    });
    EXPECT_EQ(died_of, signal);  // the exit status still tells the signal
    EXPECT_EQ(entries(tmp.path()), std::set<std::string>{"ckpt"});
    EXPECT_EQ(read_text(dst / "payload.txt"), "old");
  }
}

// The guard io::save_safetensors holds over its "<file>.tmp.<pid>" while
// writing: a registered file is removed on the signal, a committed one stays.
TEST(StagedDirectory, ARegisteredTemporaryFileIsRemovedOnInterrupt) {
  const testing::TempDir tmp;
  const int died_of = run_child([&] {
    const Tensor t = Tensor::from_vector(std::vector<float>(10, 1.0f), {10});
    io::save_safetensors(tmp.path() / "a.safetensors", {{"w", t}});
    const io::InterruptCleanup guard(tmp.path() / "b.safetensors.tmp.test");
    write_text(tmp.path() / "b.safetensors.tmp.test", "partial");
    ::raise(SIGTERM);
  });
  EXPECT_EQ(died_of, SIGTERM);
  EXPECT_EQ(entries(tmp.path()), std::set<std::string>{"a.safetensors"});
}

TEST(StagedDirectory, SiblingsOfADeadWriterAreSweptOnTheNextWrite) {
  const testing::TempDir tmp;
  const fs::path dst = tmp.path() / "ckpt";
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string tag = std::to_string(dead) + "-abcdefgh";
  fs::create_directories(tmp.path() / ("ckpt.tmp-" + tag));
  write_text(tmp.path() / ("ckpt.tmp-" + tag) / "model.safetensors.tmp.1", "partial");
  // A destination moved aside whose replacement never arrived comes back.
  fs::create_directories(tmp.path() / ("ckpt.old-" + tag));
  fill(tmp.path() / ("ckpt.old-" + tag), "before");
  // A live writer's staging folder (this process) and other names are left.
  const std::string live = "ckpt.tmp-" + std::to_string(::getpid()) + "-zzzzzzzz";
  fs::create_directories(tmp.path() / live);
  fs::create_directories(tmp.path() / "ckpt.tmp-notapid");
  io::StagedDirectoryOptions force;
  force.force = true;
  io::write_staged_directory(dst, force, [](const fs::path& s) { fill(s, "after"); });
  EXPECT_EQ(read_text(dst / "payload.txt"), "after");
  EXPECT_EQ(entries(tmp.path()), (std::set<std::string>{"ckpt", live, "ckpt.tmp-notapid"}));
}

}  // namespace
}  // namespace oasr
