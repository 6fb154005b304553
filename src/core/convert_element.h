// One element conversion between any two DTypes, shared by the CPU loop and
// the CUDA kernel so both produce the same bits (DESIGN.md §1, §3).
//   - Floating targets go through float32: every narrow float and every
//     integer up to 24 bits is exact in float32; wider integers round once
//     (RNE) in the integer->float32 cast, then once more into a narrow format.
//   - Integer targets follow C++/PyTorch: truncate toward zero through int64,
//     then wrap to the target width; NaN and values outside int64 become 0.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/float_types.h"
#include "core/hd.h"

namespace oasr {

OASR_HD inline float load_element_as_float(const void* p, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return *static_cast<const float*>(p);
    case DType::kF16:
      return f16_bits_to_f32(*static_cast<const uint16_t*>(p));
    case DType::kBF16:
      return bf16_bits_to_f32(*static_cast<const uint16_t*>(p));
    case DType::kF8E4M3:
      return e4m3_bits_to_f32(*static_cast<const uint8_t*>(p));
    case DType::kI8:
      return static_cast<float>(*static_cast<const int8_t*>(p));
    case DType::kU8:
      return static_cast<float>(*static_cast<const uint8_t*>(p));
    case DType::kI32:
      return static_cast<float>(*static_cast<const int32_t*>(p));
    case DType::kI64:
      return static_cast<float>(*static_cast<const int64_t*>(p));
  }
  return 0.f;
}

OASR_HD inline int64_t load_element_as_int64(const void* p, DType dtype) {
  switch (dtype) {
    case DType::kI8:
      return *static_cast<const int8_t*>(p);
    case DType::kU8:
      return *static_cast<const uint8_t*>(p);
    case DType::kI32:
      return *static_cast<const int32_t*>(p);
    case DType::kI64:
      return *static_cast<const int64_t*>(p);
    default: {
      const float v = load_element_as_float(p, dtype);
      // 9.2e18 < 2^63: the cast below is defined for every value that passes.
      if (!(v < 9.2e18f && v > -9.2e18f)) return 0;
      return static_cast<int64_t>(v);
    }
  }
}

OASR_HD inline void convert_element(const void* src, DType src_dtype, void* dst, DType dst_dtype) {
  switch (dst_dtype) {
    case DType::kF32:
      *static_cast<float*>(dst) = load_element_as_float(src, src_dtype);
      return;
    case DType::kF16:
      *static_cast<uint16_t*>(dst) = f32_to_f16_bits(load_element_as_float(src, src_dtype));
      return;
    case DType::kBF16:
      *static_cast<uint16_t*>(dst) = f32_to_bf16_bits(load_element_as_float(src, src_dtype));
      return;
    case DType::kF8E4M3:
      *static_cast<uint8_t*>(dst) = f32_to_e4m3_bits(load_element_as_float(src, src_dtype));
      return;
    case DType::kI8:
      *static_cast<int8_t*>(dst) = static_cast<int8_t>(load_element_as_int64(src, src_dtype));
      return;
    case DType::kU8:
      *static_cast<uint8_t*>(dst) = static_cast<uint8_t>(load_element_as_int64(src, src_dtype));
      return;
    case DType::kI32:
      *static_cast<int32_t*>(dst) = static_cast<int32_t>(load_element_as_int64(src, src_dtype));
      return;
    case DType::kI64:
      *static_cast<int64_t*>(dst) = load_element_as_int64(src, src_dtype);
      return;
  }
}

// Size in bytes, usable in device code (dtype_size() lives in a .cc).
OASR_HD inline int dtype_size_hd(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kF8E4M3:
      return 1;
    case DType::kI64:
      return 8;
  }
  return 0;
}

}  // namespace oasr
