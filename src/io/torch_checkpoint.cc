// torch.save zip checkpoints: the archive (libzip), the pickle's torch hooks
// (storages and _rebuild_tensor_v2) and the choice of the state dict.
#include "io/torch_checkpoint.h"

#include <zip.h>

#include <array>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "core/error.h"
#include "io/pickle.h"
#include "io/tensor_extent.h"

namespace oasr::io {

namespace fs = std::filesystem;
using pickle::Kind;
using pickle::Value;
using pickle::ValueRef;

const Tensor* TorchStateDict::find(const std::string& name) const {
  for (const auto& [key, tensor] : tensors) {
    if (key == name) return &tensor;
  }
  return nullptr;
}

namespace {

// ---- the zip archive ----------------------------------------------------------

// Deflate's best case: 1032 bytes out per byte in.
constexpr uint64_t kMaxDeflateRatio = 1032;

class ZipArchive {
 public:
  // The whole file, or `size` bytes of it from `offset` (a checkpoint stored
  // inside another archive, io/tar_archive.h), read in place.
  ZipArchive(const fs::path& path, uint64_t offset, std::optional<uint64_t> size)
      : path_(path.string()) {
    std::error_code ec;
    const uint64_t whole = fs::file_size(path, ec);
    OASR_CHECK(!ec, kIo, path_, ": cannot read the file size: ", ec.message());
    file_size_ = size ? *size : whole - offset;
    zip_error_t source_error;
    zip_error_init(&source_error);
    zip_source_t* source = zip_source_file_create(
        path_.c_str(), offset, size ? static_cast<zip_int64_t>(*size) : zip_int64_t{-1},
        &source_error);
    if (source == nullptr) {
      const std::string reason = zip_error_strerror(&source_error);
      zip_error_fini(&source_error);
      OASR_THROW(kIo, path_, ": cannot read the file: ", reason);
    }
    zip_error_fini(&source_error);
    zip_error_t error;
    zip_error_init(&error);
    archive_ = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
    if (archive_ == nullptr) {
      zip_source_free(source);
      const int code = zip_error_code_zip(&error);
      const std::string reason = zip_error_strerror(&error);
      zip_error_fini(&error);
      if (code == ZIP_ER_NOZIP) {
        OASR_THROW(kCorruptFile, path_,
                   ": truncated or damaged zip archive (its central directory is missing)");
      }
      if (code == ZIP_ER_OPEN || code == ZIP_ER_READ || code == ZIP_ER_SEEK) {
        OASR_THROW(kIo, path_, ": cannot read the file: ", reason);
      }
      OASR_THROW(kCorruptFile, path_, ": damaged zip archive: ", reason);
    }
    zip_error_fini(&error);
  }
  ~ZipArchive() {
    if (archive_ != nullptr) zip_discard(archive_);
  }
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    const zip_int64_t count = zip_get_num_entries(archive_, 0);
    for (zip_int64_t i = 0; i < count; ++i) {
      const char* name = zip_get_name(archive_, static_cast<zip_uint64_t>(i), 0);
      out.emplace_back(name != nullptr ? name : "");
    }
    return out;
  }

  std::optional<zip_uint64_t> locate(const std::string& name) const {
    const zip_int64_t index = zip_name_locate(archive_, name.c_str(), 0);
    if (index < 0) return std::nullopt;
    return static_cast<zip_uint64_t>(index);
  }

  // The entry's uncompressed size as the archive states it, refused when
  // the file could not hold it (stored: its own size; deflated: 1032 times),
  // so a lying size never becomes an allocation.
  uint64_t size(zip_uint64_t index) const {
    zip_stat_t stat;
    zip_stat_init(&stat);
    OASR_CHECK(zip_stat_index(archive_, index, 0, &stat) == 0 && (stat.valid & ZIP_STAT_SIZE) &&
                   (stat.valid & ZIP_STAT_COMP_METHOD),
               kCorruptFile, path_, ": cannot stat zip entry #", index, ": ",
               zip_strerror(archive_));
    const std::string name = stat.name != nullptr ? stat.name : "#" + std::to_string(index);
    OASR_CHECK(stat.comp_method == ZIP_CM_STORE || stat.comp_method == ZIP_CM_DEFLATE, kUnsupported,
               path_, ": zip entry ", name, " is compressed with method ", stat.comp_method,
               "; torch.save stores entries uncompressed (zip's deflate is read too): re-save the "
               "checkpoint with torch.save");
    const uint64_t limit =
        stat.comp_method == ZIP_CM_STORE ? file_size_ : file_size_ * kMaxDeflateRatio;
    OASR_CHECK(stat.size <= limit, kCorruptFile, path_, ": zip entry ", name, " claims ", stat.size,
               " bytes, more than the ", file_size_, "-byte file can hold: the archive is damaged");
    return stat.size;
  }

  // Reads the whole entry into `out` (exactly `count` bytes, its size), so
  // libzip checks the entry's CRC on the way.
  void read(zip_uint64_t index, const std::string& name, void* out, uint64_t count) const {
    zip_file_t* file = zip_fopen_index(archive_, index, 0);
    OASR_CHECK(file != nullptr, kCorruptFile, path_, ": cannot open zip entry ", name, ": ",
               zip_strerror(archive_));
    uint64_t done = 0;
    std::string failure;
    while (done < count) {
      const zip_int64_t got = zip_fread(file, static_cast<char*>(out) + done, count - done);
      if (got <= 0) {
        failure = got < 0 ? zip_error_strerror(zip_file_get_error(file)) : "unexpected end";
        break;
      }
      done += static_cast<uint64_t>(got);
    }
    // A read of the full size is the moment libzip compares the CRC.
    if (failure.empty()) {
      char probe;
      const zip_int64_t extra = zip_fread(file, &probe, 1);
      if (extra < 0) failure = zip_error_strerror(zip_file_get_error(file));
    }
    zip_fclose(file);
    OASR_CHECK(failure.empty(), kCorruptFile, path_, ": zip entry ", name, " is damaged (read ",
               done, " of ", count, " bytes): ", failure);
  }

  std::string read_text(zip_uint64_t index, const std::string& name, uint64_t limit) const {
    const uint64_t count = size(index);
    OASR_CHECK(count <= limit, kCorruptFile, path_, ": zip entry ", name, " is ", count,
               " bytes; at most ", limit, " expected");
    std::string text(count, '\0');
    read(index, name, text.data(), count);
    return text;
  }

 private:
  std::string path_;
  uint64_t file_size_ = 0;
  zip_t* archive_ = nullptr;
};

// ---- storages -------------------------------------------------------------------

// A torch.<X>Storage class: its element width in the file and how it is served.
enum class Conversion { kNone, kF64ToF32, kI16ToI32 };
struct StorageKind {
  const char* name;
  size_t element_size;
  DType dtype;
  Conversion conversion;
  const char* torch_dtype;
};
constexpr std::array<StorageKind, 10> kStorageKinds = {{
    {"FloatStorage", 4, DType::kF32, Conversion::kNone, "float32"},
    {"HalfStorage", 2, DType::kF16, Conversion::kNone, "float16"},
    {"BFloat16Storage", 2, DType::kBF16, Conversion::kNone, "bfloat16"},
    {"DoubleStorage", 8, DType::kF32, Conversion::kF64ToF32, "float64"},
    {"LongStorage", 8, DType::kI64, Conversion::kNone, "int64"},
    {"IntStorage", 4, DType::kI32, Conversion::kNone, "int32"},
    {"ShortStorage", 2, DType::kI32, Conversion::kI16ToI32, "int16"},
    {"CharStorage", 1, DType::kI8, Conversion::kNone, "int8"},
    {"ByteStorage", 1, DType::kU8, Conversion::kNone, "uint8"},
    {"BoolStorage", 1, DType::kU8, Conversion::kNone, "bool"},
}};

// What a persistent id names: one storage entry of the archive.
struct StorageRef {
  std::string key;
  const StorageKind* kind;
  int64_t numel;
};

// One materialized tensor plus the dtype it had in the file.
struct TensorPayload {
  Tensor tensor;
  const StorageKind* kind;
};

constexpr const char* kTensorType = "tensor";
constexpr const char* kStorageType = "storage";

int64_t as_int(const Value& value, const std::string& context) {
  OASR_CHECK(value.kind == Kind::kInt, kCorruptFile, context, ": expected an int, found ",
             pickle::describe(value));
  return value.integer;
}

std::vector<int64_t> as_int_tuple(const Value& value, const std::string& context) {
  OASR_CHECK(value.kind == Kind::kTuple || value.kind == Kind::kList, kCorruptFile, context,
             ": expected a tuple of ints, found ", pickle::describe(value));
  std::vector<int64_t> out;
  for (const ValueRef& item : value.items) out.push_back(as_int(*item, context));
  return out;
}

class TorchUnpickler {
 public:
  // Storages are read once, but a strided or converted view is a copy, and
  // a pickle may rebuild one view many times: what the views copy is
  // bounded by the archive's size (with room for float64 -> float32 and
  // overlapping views).
  TorchUnpickler(const ZipArchive& zip, std::string prefix)
      : zip_(zip), prefix_(std::move(prefix)), copy_budget_(2 * zip.file_size() + (64u << 20)) {}

  ValueRef run(const std::string& pickle_entry) {
    const zip_uint64_t index = *zip_.locate(pickle_entry);
    const uint64_t size = zip_.size(index);
    std::vector<uint8_t> bytes(size);
    zip_.read(index, pickle_entry, bytes.data(), size);
    pickle::Hooks hooks;
    hooks.persistent_load = [this](const ValueRef& id) { return persistent_load(id); };
    hooks.call = [this](const std::string& global, const ValueRef& args) {
      return call(global, args);
    };
    return pickle::unpickle(bytes, hooks, zip_.path() + ": " + pickle_entry);
  }

 private:
  std::string context(const std::string& what) const { return zip_.path() + ": " + what; }

  // ('storage', torch.<X>Storage, key, location, numel)
  ValueRef persistent_load(const ValueRef& id) {
    const std::string ctx = context("persistent id");
    OASR_CHECK(id->kind == Kind::kTuple && id->items.size() == 5 &&
                   id->items[0]->kind == Kind::kString && id->items[0]->text == "storage",
               kCorruptFile, ctx, ": expected ('storage', type, key, location, numel), found ",
               pickle::describe(*id));
    const Value& type = *id->items[1];
    OASR_CHECK(type.kind == Kind::kGlobal, kCorruptFile, ctx,
               ": storage type is not a torch class: ", pickle::describe(type));
    const StorageKind* kind = nullptr;
    for (const StorageKind& candidate : kStorageKinds) {
      if (type.text == std::string("torch.") + candidate.name) kind = &candidate;
    }
    OASR_CHECK(kind != nullptr, kUnsupported, ctx, ": unsupported storage type ", type.text,
               " (supported: torch.FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage, "
               "LongStorage, IntStorage, ShortStorage, CharStorage, ByteStorage, BoolStorage)");
    OASR_CHECK(id->items[2]->kind == Kind::kString, kCorruptFile, ctx,
               ": storage key is not a str: ", pickle::describe(*id->items[2]));
    OASR_CHECK(id->items[3]->kind == Kind::kString, kCorruptFile, ctx,
               ": storage location is not a str: ", pickle::describe(*id->items[3]));
    const int64_t numel = as_int(*id->items[4], ctx);
    OASR_CHECK(numel >= 0 && numel <= std::numeric_limits<int64_t>::max() / 16, kCorruptFile, ctx,
               ": impossible storage size ", numel);
    auto ref = std::make_shared<StorageRef>(StorageRef{id->items[2]->text, kind, numel});
    return pickle::make_external(ref, kStorageType);
  }

  // The bytes of one storage, read once however many tensors view it.
  std::shared_ptr<Storage> storage_bytes(const StorageRef& ref) {
    const auto cached = storages_.find(ref.key);
    if (cached != storages_.end()) {
      OASR_CHECK(cached->second.first == ref.kind &&
                     cached->second.second->nbytes() == ref.numel * ref.kind->element_size,
                 kCorruptFile, context("storage " + ref.key),
                 ": referenced with two different types or sizes");
      return cached->second.second;
    }
    const std::string entry = prefix_ + "/data/" + ref.key;
    const auto index = zip_.locate(entry);
    OASR_CHECK(index.has_value(), kCorruptFile, context(""), "storage key '", ref.key,
               "' is missing: the archive has no entry ", entry);
    const uint64_t needed = static_cast<uint64_t>(ref.numel) * ref.kind->element_size;
    const uint64_t size = zip_.size(*index);
    OASR_CHECK(size >= needed, kCorruptFile, context(""), "truncated storage ", entry, ": ", size,
               " bytes for ", ref.numel, " ", ref.kind->torch_dtype, " elements (", needed,
               " bytes)");
    auto storage = Storage::allocate(needed, Device::cpu());
    if (needed > 0) zip_.read(*index, entry, storage->data(), needed);
    storages_.emplace(ref.key, std::make_pair(ref.kind, storage));
    return storage;
  }

  ValueRef call(const std::string& global, const ValueRef& args) {
    const auto& items = args->items;
    if (global == "torch._utils._rebuild_tensor_v2" || global == "torch._utils._rebuild_tensor") {
      const size_t minimum = global == "torch._utils._rebuild_tensor" ? 4 : 6;
      OASR_CHECK(items.size() >= minimum && items.size() <= 7, kCorruptFile, context(global),
                 ": expected ", minimum, " to 7 arguments, found ", items.size());
      return rebuild_tensor(*items[0], *items[1], *items[2], *items[3]);
    }
    // Parameters pickle as their data tensor plus flags this reader drops.
    if (global == "torch._utils._rebuild_parameter" ||
        global == "torch._utils._rebuild_parameter_with_state") {
      OASR_CHECK(!items.empty() && items[0]->kind == Kind::kExternal &&
                     items[0]->external_type == kTensorType,
                 kCorruptFile, context(global), ": first argument is not a tensor");
      return items[0];
    }
    // A tensor subclass with Python state: (func, type, args, state).
    if (global == "torch._utils._rebuild_from_type_v2" && items.size() == 4 &&
        items[0]->kind == Kind::kGlobal && items[1]->kind == Kind::kGlobal &&
        (items[1]->text == "torch._tensor.Tensor" || items[1]->text == "torch.Tensor" ||
         items[1]->text == "torch.nn.parameter.Parameter") &&
        items[2]->kind == Kind::kTuple) {
      return call(items[0]->text, items[2]);
    }
    return nullptr;
  }

  ValueRef rebuild_tensor(const Value& storage_value, const Value& offset_value,
                          const Value& size_value, const Value& stride_value) {
    const std::string ctx = context("_rebuild_tensor_v2");
    OASR_CHECK(storage_value.kind == Kind::kExternal && storage_value.external_type == kStorageType,
               kCorruptFile, ctx, ": expected a storage, found ", pickle::describe(storage_value));
    const auto& ref = *std::static_pointer_cast<StorageRef>(storage_value.external);
    const int64_t offset = as_int(offset_value, ctx + " storage_offset");
    const Shape shape = as_int_tuple(size_value, ctx + " size");
    std::vector<int64_t> strides = as_int_tuple(stride_value, ctx + " stride");
    OASR_CHECK(shape.size() == strides.size(), kCorruptFile, ctx, ": size ", shape_str(shape),
               " and stride ", shape_str(strides), " differ in rank");
    OASR_CHECK(offset >= 0, kCorruptFile, ctx, ": negative storage offset ", offset);
    for (size_t d = 0; d < shape.size(); ++d) {
      OASR_CHECK(shape[d] >= 0 && strides[d] >= 0, kCorruptFile, ctx, ": bad size ",
                 shape_str(shape), " / stride ", shape_str(strides));
      // A dimension of size 1 never steps: its stride means nothing (and
      // stepping by a huge one would overflow in gather()).
      if (shape[d] == 1) strides[d] = 0;
    }
    // Tensor lays out even an empty view contiguously: its strides must fit
    // too (io/tensor_extent.h). After this the element count cannot overflow.
    const size_t widest = std::max(ref.kind->element_size, dtype_size(ref.kind->dtype));
    OASR_CHECK(detail::tensor_nbytes(shape, widest).has_value(), kCorruptFile, ctx, ": size ",
               shape_str(shape), " is too large to address");
    const int64_t numel = shape_numel(shape);
    // The farthest element the view reaches must lie inside the storage.
    constexpr int64_t kLimit = std::numeric_limits<int64_t>::max() / 4;
    int64_t last = offset;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] > 0) {
        OASR_CHECK(
            strides[d] == 0 || (last <= kLimit && (shape[d] - 1) <= (kLimit - last) / strides[d]),
            kCorruptFile, ctx, ": stride ", shape_str(strides), " overflows");
        last += (shape[d] - 1) * strides[d];
      }
    }
    OASR_CHECK(numel == 0 || last < ref.numel, kCorruptFile, ctx, ": a ", ref.kind->torch_dtype,
               shape_str(shape), " view (offset ", offset, ", stride ", shape_str(strides),
               ") reaches element ", last, " of storage ", ref.key, " which holds ", ref.numel);
    auto payload = std::make_shared<TensorPayload>();
    payload->kind = ref.kind;
    if (numel == 0) {
      payload->tensor = Tensor::empty(shape, ref.kind->dtype);
      return pickle::make_external(payload, kTensorType);
    }
    std::shared_ptr<Storage> storage = storage_bytes(ref);
    const size_t element = ref.kind->element_size;
    bool contiguous = true;
    const Shape dense = contiguous_strides(shape);
    for (size_t d = 0; d < shape.size(); ++d) contiguous &= shape[d] == 1 || strides[d] == dense[d];
    if (contiguous && ref.kind->conversion == Conversion::kNone) {
      payload->tensor = Tensor::from_storage(storage, static_cast<size_t>(offset) * element, shape,
                                             ref.kind->dtype);
    } else {
      const uint64_t copied = static_cast<uint64_t>(numel) * dtype_size(ref.kind->dtype);
      OASR_CHECK(copied <= copy_budget_, kCorruptFile, ctx,
                 ": the views of this archive copy more ", "than twice its bytes (", ref.key,
                 " and others rebuilt over and over); a ",
                 "checkpoint written by torch.save does not");
      copy_budget_ -= copied;
      payload->tensor = gather(*storage, *ref.kind, offset, shape, strides);
    }
    return pickle::make_external(payload, kTensorType);
  }

  // A contiguous copy of a strided view, converting the element type.
  static Tensor gather(const Storage& storage, const StorageKind& kind, int64_t offset,
                       const Shape& shape, const std::vector<int64_t>& strides) {
    Tensor out = Tensor::empty(shape, kind.dtype);
    const auto* src = static_cast<const uint8_t*>(storage.data());
    auto* dst = static_cast<uint8_t*>(out.raw_data());
    const size_t in_size = kind.element_size;
    const size_t out_size = dtype_size(kind.dtype);
    std::vector<int64_t> index(shape.size(), 0);
    const int64_t numel = out.numel();
    int64_t source = offset;
    for (int64_t i = 0; i < numel; ++i) {
      const uint8_t* from = src + static_cast<size_t>(source) * in_size;
      uint8_t* to = dst + static_cast<size_t>(i) * out_size;
      switch (kind.conversion) {
        case Conversion::kNone:
          std::memcpy(to, from, in_size);
          break;
        case Conversion::kF64ToF32: {
          double value;
          std::memcpy(&value, from, sizeof(value));
          const auto narrowed = static_cast<float>(value);  // round to nearest even
          std::memcpy(to, &narrowed, sizeof(narrowed));
          break;
        }
        case Conversion::kI16ToI32: {
          int16_t value;
          std::memcpy(&value, from, sizeof(value));
          const int32_t widened = value;
          std::memcpy(to, &widened, sizeof(widened));
          break;
        }
      }
      // Advance the multi-index (last dimension fastest).
      for (size_t d = shape.size(); d-- > 0;) {
        source += strides[d];
        if (++index[d] < shape[d]) break;
        source -= strides[d] * shape[d];
        index[d] = 0;
      }
    }
    return out;
  }

  const ZipArchive& zip_;
  std::string prefix_;
  uint64_t copy_budget_;
  std::map<std::string, std::pair<const StorageKind*, std::shared_ptr<Storage>>> storages_;
};

// ---- the file around the archive ----------------------------------------------

// The legacy (pre-1.6) torch.save stream begins with PROTO 2 and a LONG1
// magic number; a zip begins with a local file header "PK\3\4" (or, empty,
// with the end-of-central-directory record "PK\5\6").
void check_leading_bytes(const fs::path& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot open the file for reading");
  in.seekg(static_cast<std::streamoff>(offset));
  std::array<char, 4> head{};
  in.read(head.data(), head.size());
  const std::streamsize got = in.gcount();
  OASR_CHECK(got > 0, kCorruptFile, path.string(), ": empty file, not a torch.save checkpoint");
  if (got == 4 && head[0] == 'P' && head[1] == 'K' &&
      ((head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6))) {
    return;
  }
  const auto first = static_cast<uint8_t>(head[0]);
  if (first == 0x80 && got == 4 && static_cast<uint8_t>(head[2]) == 0x8a && head[3] == 0x0a) {
    OASR_THROW(kUnsupported, path.string(),
               ": legacy torch.save format (PyTorch < 1.6), which oasr does not read; re-save it "
               "with PyTorch >= 1.6: python3 -c \"import torch; torch.save(torch.load('OLD.pt', "
               "map_location='cpu'), 'NEW.pt')\"");
  }
  if (first == 0x80) {
    OASR_THROW(kCorruptFile, path.string(),
               ": a bare Python pickle, not a torch.save zip archive; save it with torch.save");
  }
  OASR_THROW(kCorruptFile, path.string(),
             ": not a zip archive, so not a checkpoint written by torch.save (PyTorch >= 1.6)");
}

// "<archive>/data.pkl" names the archive folder that holds everything else.
std::string find_archive_prefix(const ZipArchive& zip) {
  const std::vector<std::string> names = zip.names();
  std::vector<std::string> prefixes;
  for (const std::string& name : names) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.substr(slash) == "/data.pkl") {
      prefixes.push_back(name.substr(0, slash));
    }
  }
  for (const std::string& name : names) {
    const size_t slash = name.find('/');
    const std::string rest = slash == std::string::npos ? name : name.substr(slash + 1);
    OASR_CHECK(rest != "constants.pkl" && rest.rfind("code/", 0) != 0, kUnsupported, zip.path(),
               ": a TorchScript archive (torch.jit.save), not a state dict; give oasr the file "
               "written by torch.save(model.state_dict(), PATH) (WeNet's final.pt)");
  }
  if (prefixes.size() != 1) {
    std::string listing;
    for (size_t i = 0; i < names.size() && i < 8; ++i) listing += (i ? ", " : "") + names[i];
    if (names.size() > 8) listing += ", ...";
    OASR_CHECK(!prefixes.empty(), kCorruptFile, zip.path(),
               ": missing data.pkl (no '<archive>/data.pkl' entry; the zip holds: ",
               listing.empty() ? "nothing" : listing, ")");
    OASR_THROW(kCorruptFile, zip.path(), ": ", prefixes.size(),
               " data.pkl entries; a torch.save archive has one");
  }
  return prefixes[0];
}

void check_format_records(const ZipArchive& zip, const std::string& prefix) {
  if (const auto index = zip.locate(prefix + "/byteorder")) {
    std::string order = zip.read_text(*index, prefix + "/byteorder", 64);
    while (!order.empty() && std::isspace(static_cast<unsigned char>(order.back())))
      order.pop_back();
    OASR_CHECK(order != "big", kUnsupported, zip.path(),
               ": big-endian tensor data (byteorder 'big'); re-save the checkpoint on a "
               "little-endian machine");
    OASR_CHECK(order == "little", kCorruptFile, zip.path(), ": byteorder record is '", order,
               "' (expected 'little' or 'big')");
  }
  if (const auto index = zip.locate(prefix + "/version")) {
    std::string version = zip.read_text(*index, prefix + "/version", 64);
    while (!version.empty() && std::isspace(static_cast<unsigned char>(version.back()))) {
      version.pop_back();
    }
    const bool digits =
        !version.empty() && version.find_first_not_of("0123456789") == std::string::npos;
    OASR_CHECK(digits, kCorruptFile, zip.path(), ": version record is '", version,
               "' (expected a number)");
  }
}

bool is_tensor(const Value& value) {
  return value.kind == Kind::kExternal && value.external_type == kTensorType;
}

std::string key_listing(const Value& dict) {
  std::string out;
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    const Value& key = *dict.entries[i].first;
    out += (i ? ", " : "") +
           (key.kind == Kind::kString ? "'" + key.text + "'" : pickle::describe(key));
    out += " (" + pickle::describe(*dict.entries[i].second) + ")";
    if (i == 11 && dict.entries.size() > 12) {
      out += ", ... " + std::to_string(dict.entries.size() - 12) + " more";
      break;
    }
  }
  return out.empty() ? "none" : out;
}

// The state dict inside the pickle's result: the dict itself when every
// value is a tensor, else its "model" / "state_dict" entry.
const Value& choose_state_dict(const Value& root, const std::string& path,
                               std::string& container_key) {
  OASR_CHECK(root.kind == Kind::kDict, kCorruptFile, path, ": holds a ", pickle::describe(root),
             ", not a state dict (a dict of tensors)");
  bool all_tensors = true;
  for (const auto& entry : root.entries) all_tensors &= is_tensor(*entry.second);
  if (all_tensors) return root;
  const Value* found = nullptr;
  for (const char* candidate : {"model", "state_dict"}) {
    for (const auto& [key, value] : root.entries) {
      if (key->kind == Kind::kString && key->text == candidate && value->kind == Kind::kDict) {
        OASR_CHECK(found == nullptr, kCorruptFile, path,
                   ": both 'model' and 'state_dict' hold a dict; which is the model is "
                   "ambiguous; save the state dict alone");
        found = value.get();
        container_key = candidate;
      }
    }
  }
  OASR_CHECK(found != nullptr, kCorruptFile, path,
             ": not a state dict: the top-level dict holds values that are not tensors and no "
             "'model' or 'state_dict' entry; keys found: ",
             key_listing(root));
  return *found;
}

}  // namespace

TorchStateDict load_torch_state_dict(const fs::path& path) {
  return load_torch_state_dict(path, 0, std::nullopt);
}

TorchStateDict load_torch_state_dict(const fs::path& path, uint64_t offset,
                                     std::optional<uint64_t> size) {
  OASR_CHECK(fs::exists(path), kNotFound, path.string(), ": no such file");
  OASR_CHECK(!fs::is_directory(path), kInvalidArgument, path.string(),
             ": is a directory, not a torch.save checkpoint file");
  check_leading_bytes(path, offset);
  ZipArchive zip(path, offset, size);
  const std::string prefix = find_archive_prefix(zip);
  check_format_records(zip, prefix);

  TorchUnpickler unpickler(zip, prefix);
  const ValueRef root = unpickler.run(prefix + "/data.pkl");

  TorchStateDict result;
  result.path = path;
  const Value& state = choose_state_dict(*root, path.string(), result.container_key);
  const std::string where =
      path.string() + (result.container_key.empty() ? "" : " ['" + result.container_key + "']");
  for (const auto& [key, value] : state.entries) {
    OASR_CHECK(key->kind == Kind::kString, kCorruptFile, where, ": a state-dict key is a ",
               pickle::describe(*key), ", not a str");
    OASR_CHECK(is_tensor(*value), kCorruptFile, where, ": '", key->text,
               "' is not a tensor (found: ", pickle::describe(*value), ")");
    const auto& payload = *std::static_pointer_cast<TensorPayload>(value->external);
    if (payload.kind->conversion != Conversion::kNone ||
        std::strcmp(payload.kind->torch_dtype, "bool") == 0) {
      result.converted.push_back(key->text + ": " + payload.kind->torch_dtype + " -> " +
                                 dtype_name(payload.kind->dtype));
    }
    result.tensors.emplace_back(key->text, payload.tensor);
  }
  return result;
}

}  // namespace oasr::io
