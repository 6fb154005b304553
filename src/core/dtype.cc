#include "core/dtype.h"

#include "core/error.h"

namespace oasr {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kF8E4M3: return 1;
  }
  OASR_THROW(kInternal, "dtype_size: unknown dtype ", static_cast<int>(dtype));
}

bool dtype_is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF8E4M3;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kF8E4M3: return "float8_e4m3fn";
  }
  return "unknown";
}

const char* dtype_safetensors_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kF8E4M3: return "F8_E4M3";
  }
  return "unknown";
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (name == dtype_safetensors_name(d)) return d;
  }
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (name == dtype_name(d) || name == dtype_safetensors_name(d)) return d;
  }
  struct Alias {
    std::string_view alias;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::kF32},  {"fp32", DType::kF32},      {"float", DType::kF32},
      {"f16", DType::kF16},  {"fp16", DType::kF16},      {"half", DType::kF16},
      {"bf16", DType::kBF16}, {"i8", DType::kI8},        {"u8", DType::kU8},
      {"i32", DType::kI32},  {"i64", DType::kI64},       {"fp8", DType::kF8E4M3},
      {"e4m3", DType::kF8E4M3}, {"float8_e4m3", DType::kF8E4M3},
  };
  for (const auto& a : kAliases) {
    if (name == a.alias) return a.dtype;
  }
  return std::nullopt;
}

}  // namespace oasr
