// Writing a directory (a checkpoint, a converted model) so that it either
// appears whole or not at all: the contents go into a fresh sibling
// "DST.tmp-<pid>-XXXXXXXX", which is renamed into place at the end (an
// existing destination is moved aside first and removed after).
//
// Interruption: the sibling is registered for removal while it is being
// written, and SIGINT / SIGTERM / SIGHUP remove it before the process dies
// of the signal (exit status unchanged). A sibling a killed process left
// behind (SIGKILL, power loss) is swept by the next write to the same
// destination once its pid no longer runs.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace oasr::io {

struct StagedDirectoryOptions {
  // Replace a non-empty destination (only one holding `marker`).
  bool force = false;
  // A file whose presence makes a non-empty destination one of ours, and so
  // replaceable with force ("oasr_config.json").
  std::string marker = "oasr_config.json";
  // Refused as the destination (the directory being read); empty: none.
  std::filesystem::path source;
  std::string what = "checkpoint";  // what messages call the directory
};

// Checks the destination (refusing, naming it: not a directory, the
// source itself, non-empty without force, non-empty and not ours), then
// calls write(staging) and puts the result in place. Any error or
// interrupt leaves the destination as it was and no staging sibling.
void write_staged_directory(const std::filesystem::path& destination,
                            const StagedDirectoryOptions& options,
                            const std::function<void(const std::filesystem::path& staging)>& write);

// A path (file or directory of files) removed if the process is
// interrupted by SIGINT / SIGTERM / SIGHUP while this object lives. The
// handler uses only async-signal-safe calls, then re-raises the signal with
// its default action. At most 16 paths at once; more are not protected.
class InterruptCleanup {
 public:
  explicit InterruptCleanup(const std::filesystem::path& path);
  ~InterruptCleanup();
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;

 private:
  int slot_ = -1;
};

// fsync(2) of a directory, so a rename inside it is durable. Best effort:
// some file systems refuse it, and the files themselves are synced.
void sync_directory(const std::filesystem::path& dir);

}  // namespace oasr::io
