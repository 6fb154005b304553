// Element types. The names are the safetensors / PyTorch names so a
// checkpoint's dtype string maps to one DType without a table elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oasr {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI8,
  kU8,
  kI32,
  kI64,
  kF8E4M3,  // float8_e4m3fn: no infinities, NaN = S.1111.111, max finite ±448
};

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                                       DType::kI8,  DType::kU8,  DType::kI32,
                                       DType::kI64, DType::kF8E4M3};

size_t dtype_size(DType dtype);
bool dtype_is_floating(DType dtype);

// Readable name ("float32", "float16", "bfloat16", "int8", "uint8", "int32",
// "int64", "float8_e4m3fn").
const char* dtype_name(DType dtype);
// safetensors header name ("F32", "F16", "BF16", "I8", "U8", "I32", "I64", "F8_E4M3").
const char* dtype_safetensors_name(DType dtype);

// Parses either spelling (and the short aliases f32/fp16/bf16/...).
std::optional<DType> parse_dtype(std::string_view name);
std::optional<DType> parse_safetensors_dtype(std::string_view name);

}  // namespace oasr
