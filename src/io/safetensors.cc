// SafeTensorsFile: the reading side (the writer is safetensors_writer.cc, the
// sharded checkpoint safetensors_checkpoint.cc).
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "io/posix_file.h"
#include "io/safetensors_header.h"

namespace oasr::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

namespace {

std::string os_error(int err) {
  return std::strerror(err);
}

}  // namespace

struct SafeTensorsFile::Impl {
  std::filesystem::path path;
  std::string label;  // the path as messages show it
  std::shared_ptr<FileMapping> mapping;
  size_t data_offset = 0;
  std::vector<TensorInfo> infos;
  std::unordered_map<std::string, size_t> index;  // name -> position in infos
  std::map<std::string, std::string> metadata;
};

SafeTensorsFile SafeTensorsFile::open(const std::filesystem::path& path) {
  const std::string label = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    OASR_THROW(kNotFound, label, ": no such file");
  }
  OASR_CHECK(!ec, kIo, label, ": cannot inspect the file: ", ec.message());
  OASR_CHECK(status.type() != std::filesystem::file_type::directory, kInvalidArgument, label,
             ": is a directory, not a .safetensors file (a checkpoint directory is opened with "
             "SafeTensorsCheckpoint)");
  // Opening a FIFO or device could block or stream forever; only plain files.
  OASR_CHECK(status.type() == std::filesystem::file_type::regular, kInvalidArgument, label,
             ": is not a regular file");

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    OASR_CHECK(err != ENOENT, kNotFound, label, ": no such file");
    OASR_THROW(kIo, label, ": cannot open the file: ", os_error(err));
  }
  FdCloser closer(fd);
  struct stat st {};
  OASR_CHECK(::fstat(fd, &st) == 0, kIo, label, ": cannot stat the file: ", os_error(errno));
  const auto file_size = static_cast<uint64_t>(st.st_size);

  // A file too short for the length prefix is refused before mapping it
  // (mmap of an empty file fails, and there would be nothing to map).
  if (file_size < detail::kHeaderLengthPrefixBytes) {
    detail::parse_header_length(label, nullptr, file_size);
  }
  void* address = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  OASR_CHECK(address != MAP_FAILED, kIo, label, ": cannot map the file (", file_size,
             " bytes) into memory: ", os_error(errno));
  auto mapping = std::make_shared<FileMapping>(address, static_cast<size_t>(file_size));

  const uint64_t header_bytes = detail::parse_header_length(label, mapping->bytes(), file_size);
  const size_t data_offset = detail::kHeaderLengthPrefixBytes + header_bytes;
  const std::string_view json_text(
      reinterpret_cast<const char*>(mapping->bytes()) + detail::kHeaderLengthPrefixBytes,
      header_bytes);
  detail::SafeTensorsHeader header =
      detail::parse_header_json(label, json_text, file_size - data_offset);

  auto impl = std::make_shared<Impl>();
  impl->path = path;
  impl->label = label;
  impl->mapping = std::move(mapping);
  impl->data_offset = data_offset;
  impl->infos = std::move(header.tensors);
  impl->metadata = std::move(header.metadata);
  for (size_t i = 0; i < impl->infos.size(); ++i) impl->index.emplace(impl->infos[i].name, i);

  SafeTensorsFile file;
  file.impl_ = std::move(impl);
  return file;
}

const std::filesystem::path& SafeTensorsFile::path() const {
  return impl_->path;
}

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> names;
  names.reserve(impl_->infos.size());
  for (const TensorInfo& info : impl_->infos) names.push_back(info.name);
  return names;
}

bool SafeTensorsFile::contains(const std::string& name) const {
  return impl_->index.count(name) != 0;
}

const TensorInfo& SafeTensorsFile::info(const std::string& name) const {
  const auto it = impl_->index.find(name);
  OASR_CHECK(it != impl_->index.end(), kNotFound, impl_->label, ": no tensor named '", name,
             "' (the file holds ", impl_->infos.size(), " tensors)");
  return impl_->infos[it->second];
}

const std::vector<TensorInfo>& SafeTensorsFile::infos() const {
  return impl_->infos;
}

const std::map<std::string, std::string>& SafeTensorsFile::metadata() const {
  return impl_->metadata;
}

Tensor SafeTensorsFile::get(const std::string& name) const {
  const TensorInfo& meta = info(name);
  const size_t nbytes = meta.data_end - meta.data_begin;
  const unsigned char* bytes = impl_->mapping->bytes() + impl_->data_offset + meta.data_begin;
  // The mapping is page-aligned, so the address is aligned exactly when the
  // file offset is; an element type read from a misaligned address is
  // undefined behaviour, hence the copy.
  if (reinterpret_cast<uintptr_t>(bytes) % dtype_size(meta.dtype) != 0) {
    Tensor copy = Tensor::empty(meta.shape, meta.dtype);
    if (nbytes > 0) std::memcpy(copy.raw_data(), bytes, nbytes);
    return copy;
  }
  // The storage is typed as writable memory but the pages are PROT_READ.
  auto storage =
      Storage::borrow(const_cast<unsigned char*>(bytes), nbytes, Device::cpu(), impl_->mapping);
  return Tensor::from_storage(std::move(storage), 0, meta.shape, meta.dtype);
}

size_t SafeTensorsFile::file_size() const {
  return impl_->mapping->size();
}

size_t SafeTensorsFile::data_section_offset() const {
  return impl_->data_offset;
}

}  // namespace oasr::io
