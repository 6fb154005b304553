// save_safetensors: an atomic writer. The file appears under its final name
// only once it is complete and on disk, so a crash or a failed write never
// leaves a half-written checkpoint where a reader would find it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/json_error.h"
#include "core/progress.h"
#include "io/safetensors.h"
#include "io/safetensors_header.h"
#include "io/staged_directory.h"

namespace oasr::io {

namespace {

using OrderedJson = nlohmann::ordered_json;

std::string os_error(int err) {
  return std::strerror(err);
}

void check_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    OASR_CHECK(!name.empty(), kInvalidArgument, "save_safetensors: a tensor has an empty name");
    OASR_CHECK(name != "__metadata__", kInvalidArgument,
               "save_safetensors: '__metadata__' is reserved by the format and cannot name a "
               "tensor");
    OASR_CHECK(names.insert(name).second, kInvalidArgument, "save_safetensors: tensor name '", name,
               "' is given twice");
    OASR_CHECK(tensor.defined(), kInvalidArgument, "save_safetensors: tensor '", name,
               "' is undefined");
  }
}

// The header text, padded with spaces so the data section (after the 8-byte
// length and the header) starts at a multiple of 8 bytes: every element then
// sits aligned for its type, and readers can borrow it without a copy.
std::string build_header(const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = dtype_safetensors_name(tensor.dtype());
    entry["shape"] = tensor.shape();
    entry["data_offsets"] = {offset, offset + tensor.nbytes()};
    offset += tensor.nbytes();
    header[name] = std::move(entry);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const OrderedJson::exception& e) {
    OASR_THROW(kInvalidArgument,
               "save_safetensors: a tensor name or metadata string is not "
               "valid UTF-8 (",
               json_error_text(e), ")");
  }
  const size_t aligned = (text.size() + 7) / 8 * 8;
  text.append(aligned - text.size(), ' ');
  return text;
}

// The temporary file: removed on destruction unless committed by rename.
class TempFile {
 public:
  TempFile(std::filesystem::path temp, std::filesystem::path target)
      : temp_(std::move(temp)), target_(std::move(target)), cleanup_(temp_) {
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    OASR_CHECK(fd_ >= 0, kIo, target_.string(), ": cannot create the temporary file ",
               temp_.string(), ": ", os_error(errno));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t nbytes) {
    const char* p = static_cast<const char*>(data);
    while (nbytes > 0) {
      const ssize_t n = ::write(fd_, p, nbytes);
      if (n < 0 && errno == EINTR) continue;
      OASR_CHECK(n > 0, kIo, target_.string(), ": writing ", temp_.string(),
                 " failed: ", n < 0 ? os_error(errno) : std::string("no progress"));
      p += n;
      nbytes -= static_cast<size_t>(n);
    }
  }

  void commit() {
    OASR_CHECK(::fsync(fd_) == 0, kIo, target_.string(), ": fsync of ", temp_.string(),
               " failed: ", os_error(errno));
    const int fd = fd_;
    fd_ = -1;
    OASR_CHECK(::close(fd) == 0, kIo, target_.string(), ": closing ", temp_.string(),
               " failed: ", os_error(errno));
    OASR_CHECK(::rename(temp_.c_str(), target_.c_str()) == 0, kIo, target_.string(),
               ": cannot rename ", temp_.string(), " into place: ", os_error(errno));
    committed_ = true;
    sync_directory();
  }

 private:
  // Makes the rename itself durable. Best effort: the file is already
  // complete under its name, and some file systems refuse fsync on a folder.
  void sync_directory() const {
    const std::filesystem::path dir =
        target_.has_parent_path() ? target_.parent_path() : std::filesystem::path(".");
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      (void)::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

  std::filesystem::path temp_;
  std::filesystem::path target_;
  // Removes the temporary file if SIGINT / SIGTERM ends the write.
  InterruptCleanup cleanup_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  check_tensors(tensors);
  const std::string header = build_header(tensors, metadata);
  unsigned char length_prefix[detail::kHeaderLengthPrefixBytes];
  for (size_t i = 0; i < sizeof(length_prefix); ++i) {
    length_prefix[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  }

  // Same directory as the target, so the final rename cannot cross devices.
  TempFile out(path.string() + ".tmp." + std::to_string(::getpid()), path);
  out.write(length_prefix, sizeof(length_prefix));
  out.write(header.data(), header.size());
  // Progress in MiB on a tty (ProgressBar): a multi-GB checkpoint takes
  // tens of seconds to write, most of it reading the source's pages.
  uint64_t total_bytes = 0;
  for (const auto& [name, tensor] : tensors) total_bytes += tensor.nbytes();
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  ProgressBar progress(static_cast<int64_t>((total_bytes + kMiB - 1) / kMiB),
                       "write " + path.filename().string());
  progress.set_unit("MiB");
  uint64_t written = 0;
  const auto wrote = [&](size_t nbytes) {
    const uint64_t before = (written + kMiB - 1) / kMiB;
    written += nbytes;
    progress.advance(static_cast<int64_t>((written + kMiB - 1) / kMiB - before));
  };
  constexpr size_t kPiece = 16 * kMiB;  // the bar moves inside a large tensor too
  for (const auto& [name, tensor] : tensors) {
    // One tensor at a time on the host, so a device checkpoint is never
    // duplicated in host memory all at once.
    const Tensor host = tensor.to(Device::cpu()).contiguous();
    const auto* bytes = static_cast<const char*>(host.raw_data());
    for (size_t offset = 0; offset < host.nbytes(); offset += kPiece) {
      const size_t piece = std::min(kPiece, host.nbytes() - offset);
      out.write(bytes + offset, piece);
      wrote(piece);
    }
  }
  out.commit();
  progress.finish();
}

}  // namespace oasr::io
