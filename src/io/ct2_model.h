// Reading CTranslate2's model.bin (the file `ct2-transformers-converter` and
// faster-whisper's model directories carry) without CTranslate2.
//
// The layout, as CTranslate2's ModelSpec._serialize writes it and
// models::Model::load reads it (all integers little-endian; a string is a u16
// byte count that includes a terminating NUL, then the bytes and the NUL):
//
//   u32 binary_version                       1 .. 6 are read here
//   string spec_name, u32 spec_revision      binary_version >= 2
//   u32 variable_count
//   variable_count times:
//     string name, u8 rank, u32 dims[rank]
//     binary_version >= 4: u8 dtype id (CTranslate2's DataType: 0 float32,
//                          1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16),
//                          u32 payload bytes
//     binary_version <= 3: u8 item size (4 float32, 2 int16, 1 int8),
//                          u32 element count
//     payload (row-major)
//   binary_version >= 3: u32 alias_count, then (string alias, string target)
//
// Versions 4, 5 and 6 share this layout (5 changed how CTranslate2 rounds
// when it quantizes, 6 moved the model's settings into config.json beside
// model.bin). The whole file is checked when it is opened: a truncated or
// garbled file is refused (kCorruptFile) naming the offset, what was being
// read and how many bytes it needed; a newer binary version is kUnsupported.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace oasr::io {

// CTranslate2's DataType, with its numbering (include/ctranslate2/types.h).
enum class Ct2DType : uint8_t {
  kFloat32 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
};

const char* ct2_dtype_name(Ct2DType dtype);  // "float32", "int8", ..., "bfloat16"
size_t ct2_dtype_size(Ct2DType dtype);
// The oasr dtype Ct2Model::get() returns: the same type, except int16, which
// oasr does not have and which is widened to int32 (exactly).
DType ct2_tensor_dtype(Ct2DType dtype);

inline constexpr uint32_t kCt2NewestBinaryVersion = 6;

struct Ct2VariableInfo {
  std::string name;
  Ct2DType dtype = Ct2DType::kFloat32;
  Shape shape;             // empty for a scalar
  size_t data_offset = 0;  // where the payload starts in the file
  size_t nbytes = 0;
};

// One model.bin, memory-mapped read-only. Tensors returned by get() borrow
// the mapping when their bytes are aligned for their type and are copies
// otherwise (or when widened); they are read-only either way.
class Ct2Model {
 public:
  static Ct2Model open(const std::filesystem::path& model_bin);

  const std::filesystem::path& path() const;
  size_t file_size() const;
  uint32_t binary_version() const;
  const std::string& spec_name() const;  // "" for binary version 1
  uint32_t spec_revision() const;        // 1 for binary version 1

  // The stored variables, in file order (aliases are not variables).
  const std::vector<Ct2VariableInfo>& variables() const;
  std::vector<std::string> names() const;
  // (alias, target) as the file lists them; targets are stored variables.
  const std::vector<std::pair<std::string, std::string>>& aliases() const;

  // Names resolve through aliases as CTranslate2 resolves them (an alias
  // also covers the target's "_scale" / "_zero" companions).
  bool contains(const std::string& name) const;
  const std::string& resolve(const std::string& name) const;  // kNotFound names the file
  const Ct2VariableInfo& info(const std::string& name) const;
  Tensor get(const std::string& name) const;
  // A scalar (rank 0, one element) of an integer type, e.g. "encoder/num_heads".
  int64_t scalar_int(const std::string& name) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace oasr::io
