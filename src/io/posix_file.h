// POSIX file helpers every reader and writer shares: a descriptor closed on
// every path out of a scope, a read-only whole-file mapping, a file written
// and fsynced (a checkpoint writer's staging step, io/staged_directory.h),
// and a whole file read into bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace oasr::io {

// Closes a file descriptor on every path out of the scope that opened it.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser();
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// A read-only private mapping of a whole file (null and 0 for an empty
// one), unmapped when the last owner -- a tensor borrowing from it, the
// reader -- is gone.
class FileMapping {
 public:
  FileMapping(void* address, size_t size) : address_(address), size_(size) {}
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  const unsigned char* bytes() const { return static_cast<const unsigned char*>(address_); }
  size_t size() const { return size_; }

 private:
  void* address_;
  size_t size_;
};

// Creates `path` (refusing an existing one), writes `bytes` and fsyncs it;
// kIo naming the path and the OS error otherwise.
void write_file_synced(const std::filesystem::path& path, const std::string& bytes);

// The whole file's bytes; kIo naming the path when it cannot be opened.
std::string read_file_bytes(const std::filesystem::path& path);

}  // namespace oasr::io
