#include "io/staged_directory.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/logging.h"

namespace oasr::io {
namespace fs = std::filesystem;

namespace {

// ---- removal on SIGINT / SIGTERM / SIGHUP ---------------------------------------

constexpr int kSlots = 16;
constexpr size_t kMaxPath = 4096;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

// state: 0 free, 1 being filled, 2 armed. The handler reads armed slots only.
struct Slot {
  std::atomic<int> state{0};
  char path[kMaxPath] = {};
};
Slot g_slots[kSlots];

// The kernel's getdents64 record (linux/dirent.h).
struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

// Removes `path`: a file, or a directory of files (and empty
// subdirectories). Async-signal-safe: system calls only, no allocation.
void remove_path_signal_safe(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    ::unlink(path);
    return;
  }
  alignas(8) char buffer[4096];
  // Entries removed while reading can shift the listing: read again from
  // the start until a pass finds nothing left.
  for (int pass = 0; pass < 64; ++pass) {
    ::lseek(fd, 0, SEEK_SET);
    bool removed = false;
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const Dirent64*>(buffer + at);
        at += entry->d_reclen;
        const char* name = entry->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (::unlinkat(fd, name, 0) == 0 || ::unlinkat(fd, name, AT_REMOVEDIR) == 0) {
          removed = true;
        }
      }
    }
    if (!removed) break;
  }
  ::close(fd);
  ::rmdir(path);
}

// Threads inside a BlockInterrupts section: the handler, which may run on
// another thread (signals go to any thread not blocking them), waits for them
// so it never sees a folder made but not yet registered, or half a swap.
std::atomic<int> g_critical{0};

void on_interrupt(int signal) {
  for (int spin = 0; g_critical.load(std::memory_order_acquire) > 0 && spin < 100000; ++spin) {
    const struct timespec pause = {0, 10000};  // 10 us
    ::nanosleep(&pause, nullptr);
  }
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    // Another thread may still be writing into the folder: remove until the
    // folder itself is gone (or it no longer exists).
    for (int attempt = 0; attempt < 1000; ++attempt) {
      remove_path_signal_safe(slot.path);
      struct stat info;
      if (::lstat(slot.path, &info) != 0) break;
    }
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

// Installs the handler for each signal still at its default action (a
// signal the caller ignores, as nohup does with SIGHUP, stays ignored).
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int signal : kSignals) {
      struct sigaction current {};
      if (::sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
      struct sigaction action {};
      action.sa_handler = on_interrupt;
      sigemptyset(&action.sa_mask);
      for (const int other : kSignals) sigaddset(&action.sa_mask, other);
      ::sigaction(signal, &action, nullptr);
    }
  });
}

// Holds SIGINT / SIGTERM / SIGHUP back for its lifetime (they are delivered
// when it ends): a folder made and registered under it is never seen
// unregistered by the handler, and a swap of two renames is never cut in half.
class BlockInterrupts {
 public:
  BlockInterrupts() {
    sigset_t set;
    sigemptyset(&set);
    for (const int signal : kSignals) sigaddset(&set, signal);
    ::pthread_sigmask(SIG_BLOCK, &set, &previous_);
    g_critical.fetch_add(1, std::memory_order_acq_rel);
  }
  ~BlockInterrupts() {
    g_critical.fetch_sub(1, std::memory_order_acq_rel);
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  BlockInterrupts(const BlockInterrupts&) = delete;
  BlockInterrupts& operator=(const BlockInterrupts&) = delete;

 private:
  sigset_t previous_;
};

// ---- staging ----------------------------------------------------------------------

bool is_empty_dir(const fs::path& dir) {
  std::error_code error;
  return fs::is_directory(dir, error) &&
         fs::directory_iterator(dir, error) == fs::directory_iterator();
}

// "<destination><tag><pid>-<random>", made with mkdir(0777) so the umask
// decides its permissions as for any directory (mkdtemp's 0700 would
// survive the rename and hide the result from other users).
fs::path make_sibling_dir(const fs::path& destination, const char* tag) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device entropy;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = destination.string() + tag + std::to_string(::getpid()) + "-";
    for (int i = 0; i < 8; ++i) name += kAlphabet[entropy() % (sizeof(kAlphabet) - 1)];
    if (::mkdir(name.c_str(), 0777) == 0) return fs::path(name);
    OASR_CHECK(errno == EEXIST, kIo, "cannot create a directory beside ", destination.string(),
               ": ", std::strerror(errno));
  }
  OASR_THROW(kIo, "cannot find a free directory name beside ", destination.string());
}

// The pid in "<tag><pid>-<random>" after `prefix`, or 0.
pid_t owner_of(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return 0;
  const std::string rest = name.substr(prefix.size());
  const auto dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos) return 0;
  pid_t pid = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (rest[i] < '0' || rest[i] > '9') return 0;
    pid = pid * 10 + (rest[i] - '0');
  }
  return pid;
}

bool is_running(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

// Siblings an interrupted write left: staging folders are removed; a
// destination moved aside whose replacement never arrived is moved back.
void sweep_stale_siblings(const fs::path& destination, const fs::path& parent) {
  const std::string name = destination.filename().string();
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(parent, error)) {
    const std::string sibling = entry.path().filename().string();
    for (const char* tag : {".tmp-", ".old-"}) {
      const pid_t pid = owner_of(sibling, name + tag);
      if (pid <= 0 || pid == ::getpid() || is_running(pid)) continue;
      std::error_code ignored;
      if (std::string(tag) == ".old-" && !fs::exists(destination, ignored)) {
        fs::rename(entry.path(), destination, ignored);
        log::warn("{}: put back from {}, which an interrupted write (pid {}) had moved aside",
                  destination.string(), entry.path().string(), pid);
      } else {
        fs::remove_all(entry.path(), ignored);
        log::info("removed {}, left by an interrupted write (pid {})", entry.path().string(), pid);
      }
    }
  }
}

void check_destination(const fs::path& destination, const StagedDirectoryOptions& options) {
  std::error_code error;
  if (!fs::exists(destination, error)) return;
  OASR_CHECK(fs::is_directory(destination), kInvalidArgument, destination.string(),
             ": exists and is not a directory; choose another destination");
  OASR_CHECK(options.source.empty() || !fs::equivalent(destination, options.source, error),
             kInvalidArgument, destination.string(),
             ": is the source directory; write to another one");
  if (is_empty_dir(destination)) return;
  // Asked first, so a folder that is never replaced does not send the user
  // to --force only to be refused again.
  OASR_CHECK(fs::is_regular_file(destination / options.marker, error), kInvalidArgument,
             destination.string(),
             ": exists and is not empty, and is not an oasr checkpoint directory (no ",
             options.marker,
             "), so it is not replaced even with --force; choose another destination");
  OASR_CHECK(options.force, kInvalidArgument, destination.string(),
             ": exists and is not empty (an oasr checkpoint directory); pass --force to "
             "replace it");
}

}  // namespace

InterruptCleanup::InterruptCleanup(const fs::path& path) {
  const std::string text = path.string();
  if (text.size() >= kMaxPath) return;
  install_handlers();
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, text.c_str(), text.size() + 1);
      g_slots[i].state.store(2, std::memory_order_release);
      slot_ = i;
      return;
    }
  }
}

InterruptCleanup::~InterruptCleanup() {
  if (slot_ >= 0) g_slots[slot_].state.store(0, std::memory_order_release);
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

void write_staged_directory(const fs::path& requested, const StagedDirectoryOptions& options,
                            const std::function<void(const fs::path& staging)>& write) {
  // "out/" names the directory "out".
  fs::path destination = requested.lexically_normal();
  if (destination.filename().empty()) destination = destination.parent_path();
  OASR_CHECK(!destination.empty(), kInvalidArgument, "empty destination path");
  const fs::path parent = destination.has_parent_path() ? destination.parent_path() : ".";
  std::error_code error;
  sweep_stale_siblings(destination, fs::is_directory(parent, error) ? parent : fs::path());
  check_destination(destination, options);
  fs::create_directories(parent, error);
  OASR_CHECK(fs::is_directory(parent), kIo, parent.string(),
             ": cannot create the directory: ", error.message());

  fs::path staging;
  std::optional<InterruptCleanup> cleanup;
  {
    // Installed before the folder exists: a signal on another thread would
    // otherwise take the default action with the folder on disk.
    install_handlers();
    const BlockInterrupts block;
    staging = make_sibling_dir(destination, ".tmp-");
    cleanup.emplace(staging);
  }
  try {
    write(staging);
    sync_directory(staging);
    const BlockInterrupts block;  // the swap below is not interrupted half way
    if (fs::exists(destination) && !is_empty_dir(destination)) {
      // rename(2) replaces only an empty directory: move the old one aside.
      const fs::path old = make_sibling_dir(destination, ".old-");
      fs::rename(destination, old);
      try {
        fs::rename(staging, destination);
      } catch (...) {
        fs::rename(old, destination);
        throw;
      }
      fs::remove_all(old, error);
    } else {
      fs::rename(staging, destination);  // replaces an empty directory
    }
    sync_directory(parent);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, error);
    OASR_THROW(kIo, destination.string(), ": cannot put the ", options.what,
               " in place: ", e.what());
  } catch (...) {
    fs::remove_all(staging, error);
    throw;
  }
}

}  // namespace oasr::io
