// CTranslate2 model.bin reader (layout in ct2_model.h).
#include "io/ct2_model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "io/posix_file.h"
#include "io/tensor_extent.h"

namespace oasr::io {

static_assert(std::endian::native == std::endian::little,
              "model.bin is little-endian; a big-endian host would need byte swapping");

namespace {

constexpr uint8_t kLastDTypeId = 5;
// An alias can point at an alias registered before it; CTranslate2 resolves
// the chain when it registers each one, so a longer chain means a cycle.
constexpr int kMaxAliasDepth = 64;

// Reads the fields of model.bin in order; every read names what it reads
// and refuses to go past the end of the file.
class Cursor {
 public:
  Cursor(const unsigned char* bytes, size_t size, const std::string& label)
      : bytes_(bytes), size_(size), label_(label) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return size_ - offset_; }

  void need(size_t count, const std::string& what) const {
    OASR_CHECK(count <= size_ - offset_, kCorruptFile, label_, ": truncated: ", what, " needs ",
               count, " bytes at offset ", offset_, " but the file ends at ", size_, " (",
               size_ - offset_,
               " left); the file is incomplete (an interrupted download or copy, or a model "
               "split into parts that were not all joined)");
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  std::string read_string(const std::string& what) {
    const size_t at = offset_;
    const auto length = read<uint16_t>(what + " (length)");
    OASR_CHECK(length > 0, kCorruptFile, label_, ": garbled: ", what, " at offset ", at,
               " has length 0 (CTranslate2 strings count their terminating NUL, so the length "
               "is at least 1)");
    need(length, what);
    const char* text = reinterpret_cast<const char*>(bytes_ + offset_);
    OASR_CHECK(text[length - 1] == '\0', kCorruptFile, label_, ": garbled: ", what, " at offset ",
               at, " (", length, " bytes) does not end with a NUL");
    std::string out(text, length - 1);
    OASR_CHECK(out.find('\0') == std::string::npos, kCorruptFile, label_, ": garbled: ", what,
               " at offset ", at, " holds a NUL before its end");
    offset_ += length;
    return out;
  }

  void skip(size_t count, const std::string& what) {
    need(count, what);
    offset_ += count;
  }

 private:
  const unsigned char* bytes_;
  size_t size_;
  size_t offset_ = 0;
  const std::string& label_;
};

Ct2DType dtype_from_item_size(uint8_t item_size, const std::string& label, const std::string& name,
                              size_t at) {
  // Binary versions 1-3 recorded only the width; CTranslate2 maps it so.
  switch (item_size) {
    case 4:
      return Ct2DType::kFloat32;
    case 2:
      return Ct2DType::kInt16;
    case 1:
      return Ct2DType::kInt8;
    default:
      OASR_THROW(kCorruptFile, label, ": garbled: variable '", name, "' has item size ",
                 static_cast<int>(item_size), " at offset ", at,
                 " (binary versions 1-3 define 4, 2 and 1)");
  }
}

std::string shape_text(const Shape& shape) {
  return shape_str(shape);
}

}  // namespace

const char* ct2_dtype_name(Ct2DType dtype) {
  switch (dtype) {
    case Ct2DType::kFloat32:
      return "float32";
    case Ct2DType::kInt8:
      return "int8";
    case Ct2DType::kInt16:
      return "int16";
    case Ct2DType::kInt32:
      return "int32";
    case Ct2DType::kFloat16:
      return "float16";
    case Ct2DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

size_t ct2_dtype_size(Ct2DType dtype) {
  switch (dtype) {
    case Ct2DType::kFloat32:
    case Ct2DType::kInt32:
      return 4;
    case Ct2DType::kInt16:
    case Ct2DType::kFloat16:
    case Ct2DType::kBFloat16:
      return 2;
    case Ct2DType::kInt8:
      return 1;
  }
  return 0;
}

DType ct2_tensor_dtype(Ct2DType dtype) {
  switch (dtype) {
    case Ct2DType::kFloat32:
      return DType::kF32;
    case Ct2DType::kInt8:
      return DType::kI8;
    case Ct2DType::kInt16:
    case Ct2DType::kInt32:
      return DType::kI32;
    case Ct2DType::kFloat16:
      return DType::kF16;
    case Ct2DType::kBFloat16:
      return DType::kBF16;
  }
  OASR_THROW(kInternal, "unknown CTranslate2 dtype ", static_cast<int>(dtype));
}

struct Ct2Model::Impl {
  std::filesystem::path path;
  std::string label;
  std::shared_ptr<FileMapping> mapping;
  uint32_t binary_version = 0;
  std::string spec_name;
  uint32_t spec_revision = 1;
  std::vector<Ct2VariableInfo> variables;
  std::vector<std::pair<std::string, std::string>> aliases;
  std::unordered_map<std::string, size_t> index;          // variable name -> position
  std::unordered_map<std::string, std::string> resolved;  // alias -> variable name

  void parse();
  const std::string* find(const std::string& name) const;
};

void Ct2Model::Impl::parse() {
  Cursor in(mapping->bytes(), mapping->size(), label);
  binary_version = in.read<uint32_t>("the binary version");
  OASR_CHECK(binary_version >= 1, kCorruptFile, label,
             ": garbled: binary version 0 at offset 0 (not a CTranslate2 model.bin?)");
  OASR_CHECK(binary_version <= kCt2NewestBinaryVersion, kUnsupported, label,
             ": CTranslate2 binary version ", binary_version, " is newer than this reader (1..",
             kCt2NewestBinaryVersion,
             "); convert the model with a CTranslate2 release that writes version ",
             kCt2NewestBinaryVersion,
             " (3.x / 4.x), or check that the file is a model.bin at all (a version this large "
             "is often another format)");
  if (binary_version >= 2) {
    spec_name = in.read_string("the spec name");
    spec_revision = in.read<uint32_t>("the spec revision");
  }
  const auto count = in.read<uint32_t>("the variable count");
  variables.reserve(std::min<size_t>(count, in.remaining() / 8 + 1));
  for (uint32_t i = 0; i < count; ++i) {
    const std::string which = "variable #" + std::to_string(i);
    Ct2VariableInfo info;
    info.name = in.read_string("the name of " + which);
    const std::string named = which + " '" + info.name + "'";
    const auto rank = in.read<uint8_t>("the rank of " + named);
    for (uint8_t d = 0; d < rank; ++d) {
      const auto dim = in.read<uint32_t>("dimension " + std::to_string(d) + " of " + named);
      info.shape.push_back(dim);
      // Checked as it grows (the rank can be 255). Zero dimensions count as
      // 1, since Tensor's strides multiply them (io/tensor_extent.h); 2^48
      // elements of the widest served type is far beyond any model.
      const std::optional<uint64_t> bytes = detail::tensor_nbytes(info.shape, sizeof(int32_t));
      OASR_CHECK(bytes && *bytes <= sizeof(int32_t) * (uint64_t{1} << 48), kCorruptFile, label,
                 ": garbled: ", named, " has an implausible shape ", shape_text(info.shape),
                 " (read before offset ", in.offset(), ")");
    }
    const auto elements = static_cast<uint64_t>(shape_numel(info.shape));
    const size_t type_at = in.offset();
    uint64_t nbytes = 0;
    if (binary_version >= 4) {
      const auto type_id = in.read<uint8_t>("the dtype of " + named);
      OASR_CHECK(type_id <= kLastDTypeId, kCorruptFile, label, ": garbled: ", named,
                 " has dtype id ", static_cast<int>(type_id), " at offset ", type_at,
                 "; CTranslate2 defines 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, "
                 "5 bfloat16");
      info.dtype = static_cast<Ct2DType>(type_id);
      nbytes = in.read<uint32_t>("the byte count of " + named);
    } else {
      const auto item_size = in.read<uint8_t>("the item size of " + named);
      info.dtype = dtype_from_item_size(item_size, label, info.name, type_at);
      nbytes = uint64_t{in.read<uint32_t>("the element count of " + named)} * item_size;
    }
    const uint64_t expected = elements * ct2_dtype_size(info.dtype);
    OASR_CHECK(nbytes == expected, kCorruptFile, label, ": garbled: ", named, " declares ", nbytes,
               " payload bytes (at offset ", type_at, ") but ", ct2_dtype_name(info.dtype),
               shape_text(info.shape), " needs ", expected);
    info.data_offset = in.offset();
    info.nbytes = static_cast<size_t>(nbytes);
    in.skip(info.nbytes, "the payload of " + named + " (" + ct2_dtype_name(info.dtype) +
                             shape_text(info.shape) + ")");
    OASR_CHECK(index.emplace(info.name, variables.size()).second, kCorruptFile, label,
               ": garbled: the variable name '", info.name, "' appears twice (", which, ")");
    variables.push_back(std::move(info));
  }
  if (binary_version >= 3) {
    const auto alias_count = in.read<uint32_t>("the alias count");
    for (uint32_t i = 0; i < alias_count; ++i) {
      const std::string which = "alias #" + std::to_string(i);
      std::string alias = in.read_string("the name of " + which);
      std::string target = in.read_string("the target of " + which + " '" + alias + "'");
      // A target may itself be an earlier alias (CTranslate2 looks it up in
      // the same index); store the final variable name.
      std::string final_target = target;
      for (int depth = 0; !index.count(final_target); ++depth) {
        const auto earlier = resolved.find(final_target);
        OASR_CHECK(earlier != resolved.end() && depth < kMaxAliasDepth, kCorruptFile, label,
                   ": garbled: ", which, " '", alias, "' points at '", target,
                   "', which is neither a variable nor an earlier alias");
        final_target = earlier->second;
      }
      OASR_CHECK(!index.count(alias) && !resolved.count(alias), kCorruptFile, label,
                 ": garbled: ", which, " '", alias, "' reuses the name of a variable or alias");
      resolved.emplace(alias, final_target);
      aliases.emplace_back(std::move(alias), std::move(target));
    }
  }
  OASR_CHECK(in.remaining() == 0, kCorruptFile, label, ": garbled: ", in.remaining(),
             " unexpected bytes after the ", binary_version >= 3 ? "alias table" : "last variable",
             " (from offset ", in.offset(), " to ", mapping->size(),
             "); the file may be parts joined in the wrong order or with one too many");
}

const std::string* Ct2Model::Impl::find(const std::string& name) const {
  if (const auto it = index.find(name); it != index.end()) return &variables[it->second].name;
  if (const auto it = resolved.find(name); it != resolved.end()) return &it->second;
  // CTranslate2 also aliases the quantization scale (and zero point) of an
  // aliased variable: "<alias>_scale" is "<target>_scale".
  for (const char* suffix : {"_scale", "_zero"}) {
    const size_t length = std::strlen(suffix);
    if (name.size() > length && name.compare(name.size() - length, length, suffix) == 0) {
      const auto base = resolved.find(name.substr(0, name.size() - length));
      if (base == resolved.end()) continue;
      if (const auto it = index.find(base->second + suffix); it != index.end()) {
        return &variables[it->second].name;
      }
    }
  }
  return nullptr;
}

Ct2Model Ct2Model::open(const std::filesystem::path& model_bin) {
  auto impl = std::make_shared<Impl>();
  impl->path = model_bin;
  impl->label = model_bin.string();
  const std::string& label = impl->label;
  std::error_code ec;
  const auto status = std::filesystem::status(model_bin, ec);
  OASR_CHECK(status.type() != std::filesystem::file_type::not_found, kNotFound, label,
             ": no such file");
  OASR_CHECK(!ec, kIo, label, ": cannot inspect the file: ", ec.message());
  OASR_CHECK(status.type() == std::filesystem::file_type::regular, kInvalidArgument, label,
             ": is not a regular file (expected a CTranslate2 model.bin)");

  const int fd = ::open(model_bin.c_str(), O_RDONLY | O_CLOEXEC);
  OASR_CHECK(fd >= 0, kIo, label, ": cannot open the file: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    OASR_THROW(kIo, label, ": cannot stat the file: ", std::strerror(err));
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* address = nullptr;
  if (size > 0) {
    address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    OASR_CHECK(address != MAP_FAILED, kIo, label, ": cannot map the file (", size,
               " bytes) into memory: ", std::strerror(err));
  } else {
    ::close(fd);
  }
  impl->mapping = std::make_shared<FileMapping>(address, size);
  impl->parse();
  Ct2Model model;
  model.impl_ = std::move(impl);
  return model;
}

const std::filesystem::path& Ct2Model::path() const {
  return impl_->path;
}
size_t Ct2Model::file_size() const {
  return impl_->mapping->size();
}
uint32_t Ct2Model::binary_version() const {
  return impl_->binary_version;
}
const std::string& Ct2Model::spec_name() const {
  return impl_->spec_name;
}
uint32_t Ct2Model::spec_revision() const {
  return impl_->spec_revision;
}
const std::vector<Ct2VariableInfo>& Ct2Model::variables() const {
  return impl_->variables;
}

std::vector<std::string> Ct2Model::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->variables.size());
  for (const Ct2VariableInfo& info : impl_->variables) out.push_back(info.name);
  return out;
}

const std::vector<std::pair<std::string, std::string>>& Ct2Model::aliases() const {
  return impl_->aliases;
}

bool Ct2Model::contains(const std::string& name) const {
  return impl_->find(name) != nullptr;
}

const std::string& Ct2Model::resolve(const std::string& name) const {
  const std::string* found = impl_->find(name);
  OASR_CHECK(found != nullptr, kNotFound, impl_->label, ": no variable or alias named '", name,
             "'");
  return *found;
}

const Ct2VariableInfo& Ct2Model::info(const std::string& name) const {
  return impl_->variables[impl_->index.at(resolve(name))];
}

Tensor Ct2Model::get(const std::string& name) const {
  const Ct2VariableInfo& meta = info(name);
  const unsigned char* bytes = impl_->mapping->bytes() + meta.data_offset;
  const DType dtype = ct2_tensor_dtype(meta.dtype);
  if (meta.dtype == Ct2DType::kInt16) {
    Tensor out = Tensor::empty(meta.shape, dtype);
    auto* values = out.data<int32_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      int16_t value;
      std::memcpy(&value, bytes + 2 * i, 2);
      values[i] = value;
    }
    return out;
  }
  // The mapping is page-aligned, so the address is aligned when the offset
  // is; CTranslate2 does not pad payloads, so many are not.
  if (meta.data_offset % dtype_size(dtype) != 0 || meta.nbytes == 0) {
    Tensor copy = Tensor::empty(meta.shape, dtype);
    if (meta.nbytes > 0) std::memcpy(copy.raw_data(), bytes, meta.nbytes);
    return copy;
  }
  auto storage = Storage::borrow(const_cast<unsigned char*>(bytes), meta.nbytes, Device::cpu(),
                                 impl_->mapping);
  return Tensor::from_storage(std::move(storage), 0, meta.shape, dtype);
}

int64_t Ct2Model::scalar_int(const std::string& name) const {
  const Ct2VariableInfo& meta = info(name);
  OASR_CHECK(
      meta.shape.empty() && (meta.dtype == Ct2DType::kInt8 || meta.dtype == Ct2DType::kInt16 ||
                             meta.dtype == Ct2DType::kInt32),
      kCorruptFile, impl_->label, ": variable '", name, "' is ", ct2_dtype_name(meta.dtype),
      shape_text(meta.shape), "; expected an integer scalar");
  const Tensor value = get(name);
  return value.dtype() == DType::kI8 ? *value.data<int8_t>() : *value.data<int32_t>();
}

}  // namespace oasr::io
