// The 16- and 8-bit float formats as bit containers, and their conversions
// to and from float32. Conversions to a narrower format round to nearest,
// ties to even, in integer arithmetic, so host and device produce the same
// bits without depending on the platform's conversion instructions.
//   float16        IEEE binary16; overflow -> ±inf; NaN stays NaN (quiet).
//   bfloat16       top half of binary32; NaN stays NaN (quiet).
//   float8_e4m3fn  1.4.3, bias 7, no infinities, S.1111.111 is NaN, largest
//                  finite ±448. Conversion saturates: any magnitude above
//                  448, infinities included, becomes ±448 (PTX's
//                  cvt.rn.satfinite); NaN becomes 0x7F.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace oasr {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Float8E4M3 {
  uint8_t bits;
};

// Round-to-nearest-even of the integer `value >> shift` (shift in 1..31).
OASR_HD inline uint32_t shift_right_rne(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t remainder = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return kept + ((remainder > half || (remainder == half && (kept & 1u))) ? 1u : 0u);
}

OASR_HD inline uint16_t f32_to_f16_bits(float value) {
  const uint32_t x = float_bits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16: inf
  const uint32_t exponent = ax >> 23;
  if (exponent < 113) {  // below 2^-14: a float16 subnormal (unit 2^-24) or zero
    if (exponent < 102) return static_cast<uint16_t>(sign);  // below 2^-25 -> 0
    const uint32_t mantissa = (ax & 0x7fffffu) | 0x800000u;
    return static_cast<uint16_t>(sign | shift_right_rne(mantissa, 126 - exponent));
  }
  // Rebias 127 -> 15 and round off 13 mantissa bits; a carry into the
  // exponent is the correct result (up to and including infinity).
  return static_cast<uint16_t>(sign | shift_right_rne(ax - (112u << 23), 13));
}

OASR_HD inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // mantissa * 2^-24 is exact in float32.
    const float magnitude = static_cast<float>(mantissa) * bits_float(0x33800000u);
    return bits_float(sign | float_bits(magnitude));
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

OASR_HD inline uint16_t f32_to_bf16_bits(float value) {
  const uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  // The sign bit sits above the rounded field, so rounding the whole word works.
  return static_cast<uint16_t>(shift_right_rne(x, 16));
}

OASR_HD inline float bf16_bits_to_f32(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

inline constexpr uint8_t kE4M3NaN = 0x7f;
inline constexpr uint8_t kE4M3MaxFinite = 0x7e;  // 448

OASR_HD inline uint8_t f32_to_e4m3_bits(float value) {
  const uint32_t x = float_bits(value);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return kE4M3NaN;
  const uint32_t exponent = ax >> 23;
  uint32_t code;
  if (exponent < 121) {  // below 2^-6: a subnormal (unit 2^-9) or zero
    if (exponent < 117) return static_cast<uint8_t>(sign);  // below 2^-10 -> 0
    const uint32_t mantissa = (ax & 0x7fffffu) | 0x800000u;
    code = shift_right_rne(mantissa, 141 - exponent);
  } else if (exponent > 135) {  // >= 2^9, infinity included: saturate
    code = kE4M3MaxFinite;
  } else {
    code = shift_right_rne(ax - (120u << 23), 20);  // rebias 127 -> 7, keep 3 bits
  }
  if (code > kE4M3MaxFinite) code = kE4M3MaxFinite;
  return static_cast<uint8_t>(sign | code);
}

OASR_HD inline float e4m3_bits_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0xfu;
  const uint32_t mantissa = b & 0x7u;
  if ((b & 0x7fu) == 0x7fu) return bits_float(0x7fc00000u | sign);
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * bits_float(0x3b000000u);  // 2^-9
    return bits_float(sign | float_bits(magnitude));
  }
  return bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// The fp8 KV cache's per-vector scale (ops/kv_fp8.h): the smallest power
// of two 2^k with amax <= 448 * 2^k, 1 for amax 0. amax = m 2^e with m in
// [0.5, 1) and 448 = 0.875 2^9, so k = e - 9 when m <= 0.875, else e - 8.
// One body for the CPU and CUDA sides, so both pick the same scale.
OASR_HD inline float e4m3_pow2_scale(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  int e = 0;
  const float m = frexpf(amax, &e);
  return ldexpf(1.0f, m <= 0.875f ? e - 9 : e - 8);
}

OASR_HD inline float to_float(Half h) {
  return f16_bits_to_f32(h.bits);
}
OASR_HD inline float to_float(BFloat16 b) {
  return bf16_bits_to_f32(b.bits);
}
OASR_HD inline float to_float(Float8E4M3 f) {
  return e4m3_bits_to_f32(f.bits);
}
OASR_HD inline Half to_half(float v) {
  return Half{f32_to_f16_bits(v)};
}
OASR_HD inline BFloat16 to_bfloat16(float v) {
  return BFloat16{f32_to_bf16_bits(v)};
}
OASR_HD inline Float8E4M3 to_e4m3(float v) {
  return Float8E4M3{f32_to_e4m3_bits(v)};
}

}  // namespace oasr
