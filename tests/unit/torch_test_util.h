// Writing torch.save-style checkpoints by hand in tests: a pickle assembler
// (one method per opcode, bytes as Python's pickle module defines them) and
// a zip writer (libzip), so the reader can be fed both well-formed files and
// precisely broken ones without PyTorch.
#pragma once

#include <zip.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace oasr::testing {

class PickleBuilder {
 public:
  PickleBuilder& op(uint8_t code) {
    bytes_ += static_cast<char>(code);
    return *this;
  }
  PickleBuilder& raw(const std::string& bytes) {
    bytes_ += bytes;
    return *this;
  }
  PickleBuilder& le(uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xFF);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::string& bytes() const { return bytes_; }

  PickleBuilder& proto(int version) { return op(0x80).le(version, 1); }
  PickleBuilder& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  PickleBuilder& put(uint32_t index) {
    return index < 256 ? op('q').le(index, 1) : op('r').le(index, 4);
  }
  PickleBuilder& long_put(uint32_t index) { return op('r').le(index, 4); }
  PickleBuilder& get(uint32_t index) {
    return index < 256 ? op('h').le(index, 1) : op('j').le(index, 4);
  }
  PickleBuilder& long_get(uint32_t index) { return op('j').le(index, 4); }
  PickleBuilder& mark() { return op('('); }
  PickleBuilder& tuple() { return op('t'); }
  PickleBuilder& tuple_n(int n) { return n == 0 ? op(')') : op(0x84 + n); }  // TUPLE1..3
  PickleBuilder& empty_dict() { return op('}'); }
  PickleBuilder& empty_list() { return op(']'); }
  PickleBuilder& setitem() { return op('s'); }
  PickleBuilder& setitems() { return op('u'); }
  PickleBuilder& append() { return op('a'); }
  PickleBuilder& appends() { return op('e'); }
  PickleBuilder& none() { return op('N'); }
  PickleBuilder& boolean(bool value) { return op(value ? 0x88 : 0x89); }
  PickleBuilder& reduce() { return op('R'); }
  PickleBuilder& build() { return op('b'); }
  PickleBuilder& binpersid() { return op('Q'); }
  PickleBuilder& stop() { return op('.'); }
  // The shortest form Python's pickler uses for each range.
  PickleBuilder& integer(int64_t value) {
    if (value >= 0 && value < 256) return op('K').le(value, 1);
    if (value >= 0 && value < 65536) return op('M').le(value, 2);
    if (value >= INT32_MIN && value <= INT32_MAX)
      return op('J').le(static_cast<uint32_t>(value), 4);
    return op(0x8a).le(8, 1).le(static_cast<uint64_t>(value), 8);  // LONG1
  }
  PickleBuilder& binfloat(double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    op('G');
    for (int i = 7; i >= 0; --i) bytes_ += static_cast<char>((bits >> (8 * i)) & 0xFF);
    return *this;
  }
  PickleBuilder& text(const std::string& value) {  // BINUNICODE
    return op('X').le(value.size(), 4).raw(value);
  }
  PickleBuilder& short_text(const std::string& value) {  // SHORT_BINUNICODE (protocol 4)
    return op(0x8c).le(value.size(), 1).raw(value);
  }
  PickleBuilder& int_tuple(const std::vector<int64_t>& values) {
    if (values.size() <= 3) {
      for (int64_t v : values) integer(v);
      return tuple_n(static_cast<int>(values.size()));
    }
    mark();
    for (int64_t v : values) integer(v);
    return tuple();
  }

  // torch._utils._rebuild_tensor_v2(('storage', torch.<kind>, key, 'cpu', numel),
  //                                  offset, size, stride, False, OrderedDict())
  PickleBuilder& tensor(const std::string& storage_kind, const std::string& key, int64_t numel,
                        int64_t offset, const std::vector<int64_t>& size,
                        const std::vector<int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2");
    mark();
    mark().text("storage").global("torch", storage_kind).text(key).text("cpu").integer(numel);
    tuple().binpersid();
    integer(offset).int_tuple(size).int_tuple(stride).boolean(false);
    global("collections", "OrderedDict").tuple_n(0).reduce();
    tuple();
    return reduce();
  }

 private:
  std::string bytes_;
};

struct ZipEntry {
  std::string name;
  std::string bytes;
  bool deflate = false;
};

inline void write_zip(const std::filesystem::path& path, const std::vector<ZipEntry>& entries) {
  std::filesystem::remove(path);
  int error = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_EXCL, &error);
  if (archive == nullptr) throw std::runtime_error("zip_open failed for " + path.string());
  for (const ZipEntry& entry : entries) {
    zip_source_t* source = zip_source_buffer(archive, entry.bytes.data(), entry.bytes.size(), 0);
    const zip_int64_t index = zip_file_add(archive, entry.name.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0) throw std::runtime_error("zip_file_add failed: " + entry.name);
    zip_set_file_compression(archive, static_cast<zip_uint64_t>(index),
                             entry.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(archive) != 0) throw std::runtime_error("zip_close failed for " + path.string());
}

inline std::string tensor_bytes(const Tensor& tensor) {
  const Tensor dense = tensor.contiguous();
  return std::string(static_cast<const char*>(dense.raw_data()), dense.nbytes());
}

inline const char* storage_kind_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "FloatStorage";
    case DType::kF16:
      return "HalfStorage";
    case DType::kBF16:
      return "BFloat16Storage";
    case DType::kI64:
      return "LongStorage";
    case DType::kI32:
      return "IntStorage";
    case DType::kI8:
      return "CharStorage";
    case DType::kU8:
      return "ByteStorage";
    default:
      throw std::runtime_error("no torch storage for this dtype");
  }
}

// The pickle torch.save writes for an OrderedDict state dict whose tensors
// each own storage "0", "1", ... (contiguous).
inline std::string state_dict_pickle(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  PickleBuilder p;
  p.proto(2).global("collections", "OrderedDict").tuple_n(0).reduce().mark();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    p.text(tensors[i].first)
        .tensor(storage_kind_of(t.dtype()), std::to_string(i), t.numel(), 0, t.shape(),
                contiguous_strides(t.shape()));
  }
  return p.setitems().stop().bytes();
}

// A complete torch.save zip of `tensors` under archive folder `archive`.
inline void write_state_dict_pt(const std::filesystem::path& path,
                                const std::vector<std::pair<std::string, Tensor>>& tensors,
                                const std::string& archive = "archive") {
  std::vector<ZipEntry> entries = {{archive + "/data.pkl", state_dict_pickle(tensors)}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    entries.push_back({archive + "/data/" + std::to_string(i), tensor_bytes(tensors[i].second)});
  }
  entries.push_back({archive + "/version", "3\n"});
  write_zip(path, entries);
}

}  // namespace oasr::testing
