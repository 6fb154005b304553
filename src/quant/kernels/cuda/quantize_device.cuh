// Device helpers shared by the CUDA quantize kernels (quantize.cu,
// norm_quant.cu): the format dispatch, numerics.h's amax rule as a parallel
// reduction step, and 16-byte vector loads / stores. Every value goes
// through numerics.h (quantize_int8, quantize_e4m3, mul_rn, div_rn), so the
// kernels give the CPU reference's bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/cuda/cuda_common.cuh"
#include "quant/format.h"
#include "quant/numerics.h"

namespace oasr::quant::cuda {

// One 8-bit format: Q and the quantize rule, as the output byte.
template <bool kE4m3>
struct Format8;
template <>
struct Format8<false> {
  static constexpr float kMax = kInt8Max;
  __device__ __forceinline__ static uint8_t quantize(float x_times_m) {
    return static_cast<uint8_t>(quantize_int8(x_times_m));
  }
};
template <>
struct Format8<true> {
  static constexpr float kMax = kE4m3Max;
  __device__ __forceinline__ static uint8_t quantize(float x_times_m) {
    return quantize_e4m3(x_times_m);
  }
};

// Calls fn(std::bool_constant<is_e4m3>{}) for the formats these kernels
// produce (int8, float8_e4m3fn); anything else is refused by name.
template <typename Fn>
void dispatch_format(QDType format, const char* op, Fn&& fn) {
  switch (format) {
    case QDType::kInt8:
      fn(std::false_type{});
      return;
    case QDType::kFp8E4M3:
      fn(std::true_type{});
      return;
    default:
      OASR_THROW(kUnsupported, op,
                 ": the CUDA quantize kernels produce int8 and float8_e4m3fn, got ",
                 to_string(format), "; quantize that format with its own kernel");
  }
}

// detail::row_amax's step: a magnitude replaces the running amax only when
// strictly greater, so a NaN never wins and the running value is never NaN.
// On non-NaN values this is max, which is associative and commutative, so any
// reduction order gives the sequential loop's bits.
__device__ __forceinline__ float amax_step(float amax, float magnitude) {
  return magnitude > amax ? magnitude : amax;
}
struct AmaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return amax_step(a, b); }
};
// detail::row_amax's floor: an all-zero row still gets a finite scale.
__device__ __forceinline__ float floor_amax(float amax) {
  return amax > kAmaxFloor ? amax : kAmaxFloor;
}

// kVec consecutive elements of T widened to float: one 16-byte load when
// kVec * sizeof(T) == 16 (p 16-byte aligned), else kVec == 1.
template <typename T, int kVec>
__device__ __forceinline__ void load_as_float(const T* p, float (&out)[kVec]) {
  if constexpr (kVec == 1) {
    out[0] = ops::cuda::to_float(*p);
  } else {
    static_assert(kVec * sizeof(T) == 16, "a vector load is 16 bytes");
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    T elements[kVec];
    memcpy(elements, &raw, sizeof(raw));
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = ops::cuda::to_float(elements[i]);
  }
}

// kVec consecutive fp32 values (p 16-byte aligned when kVec > 1; kVec is 1
// or a multiple of 4).
template <int kVec>
__device__ __forceinline__ void load_floats(const float* p, float (&out)[kVec]) {
  if constexpr (kVec == 1) {
    out[0] = *p;
  } else {
    static_assert(kVec % 4 == 0, "fp32 vectors are loaded as float4");
#pragma unroll
    for (int i = 0; i < kVec; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + i);
      out[i] = v.x;
      out[i + 1] = v.y;
      out[i + 2] = v.z;
      out[i + 3] = v.w;
    }
  }
}

// kVec bytes in one store (p kVec-byte aligned); kVec is 1, 4, 8 or 16.
template <int kVec>
__device__ __forceinline__ void store_bytes(uint8_t* p, const uint8_t (&bytes)[kVec]) {
  if constexpr (kVec == 1) {
    *p = bytes[0];
  } else if constexpr (kVec == 4) {
    uint32_t word;
    memcpy(&word, bytes, sizeof(word));
    *reinterpret_cast<uint32_t*>(p) = word;
  } else if constexpr (kVec == 8) {
    uint2 word;
    memcpy(&word, bytes, sizeof(word));
    *reinterpret_cast<uint2*>(p) = word;
  } else {
    static_assert(kVec == 16, "stores are 1, 4, 8 or 16 bytes");
    uint4 word;
    memcpy(&word, bytes, sizeof(word));
    *reinterpret_cast<uint4*>(p) = word;
  }
}

// The elements per 16-byte vector of T.
template <typename T>
inline constexpr int kVecOf = static_cast<int>(16 / sizeof(T));

inline bool aligned_to(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace oasr::quant::cuda
