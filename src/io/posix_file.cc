#include "io/posix_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace oasr::io {

FdCloser::~FdCloser() {
  ::close(fd_);
}

FileMapping::~FileMapping() {
  if (address_ != nullptr) ::munmap(address_, size_);
}

void write_file_synced(const std::filesystem::path& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  OASR_CHECK(fd >= 0, kIo, path.string(), ": cannot create: ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      const int saved = errno;
      ::close(fd);
      OASR_THROW(kIo, path.string(), ": write failed: ", std::strerror(saved));
    }
    done += static_cast<size_t>(wrote);
  }
  const bool synced = ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  OASR_CHECK(synced, kIo, path.string(), ": fsync failed: ", std::strerror(saved));
}

std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot open for reading");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace oasr::io
