// NVFP4 at the format level (Nvfp4Spec): the storage of a
// weight quantized to E2M1 in blocks of 16 along K, with one float8_e4m3fn
// scale per block and one fp32 global scale, plus its reference quantize and
// dequantize. No method serves it: asking to serve nvfp4 is refused by name
// at configuration time. This file is the one definition every future NVFP4
// kernel is tested against.
//
// Storage of a logical [N, K] weight (K a multiple of 16):
//   packed       uint8 [N, K/2]: two E2M1 codes per byte, the code of the
//                EVEN k in the low nibble and the odd k in the high nibble
//                (byte j of a row = code[2j] | code[2j+1] << 4): the
//                lower-addressed element in the less significant bits, as
//                compressed-tensors' nvfp4-pack-quantized checkpoints store
//                it (sign in bit 3 of each nibble, -0 kept as code 8).
//   block_scale  float8_e4m3fn, one per 16 consecutive values of a row, in
//                one of two layouts (ScaleLayout below).
//   global_scale fp32, the dequantization multiplier of the whole tensor
//                (ModelOpt's `weight_scale_2`): value = e2m1 * block * global.
//
// E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit; magnitudes
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 for codes 0..7, code | 8 is the negative. No
// infinities, no NaN.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/hd.h"
#include "core/tensor.h"

namespace oasr::quant::nvfp4 {

inline constexpr int64_t kBlockSize = 16;  // values per e4m3 block scale, along K
inline constexpr float kE2m1Max = 6.0f;    // largest E2M1 magnitude
inline constexpr float kE4m3Max = 448.0f;  // largest block-scale magnitude

// The value of a 4-bit E2M1 code (only the low 4 bits are read); code 8 is -0.
OASR_HD inline float e2m1_to_float(uint8_t code) {
  // Magnitude m = mantissa/2 for exponent 0 (subnormal), else (1 + mantissa/2) * 2^(e-1).
  const uint32_t exponent = (code >> 1) & 0x3u;
  const uint32_t mantissa = code & 0x1u;
  const float magnitude = exponent == 0 ? 0.5f * static_cast<float>(mantissa)
                                        : (1.0f + 0.5f * static_cast<float>(mantissa)) *
                                              static_cast<float>(1u << (exponent - 1u));
  return (code & 0x8u) != 0 ? -magnitude : magnitude;
}

// Round to the nearest E2M1 value, ties to the even code, saturating to ±6
// (what cvt.rn.satfinite does; infinities saturate too). The sign is kept,
// so a negative value that rounds to zero gives code 8 (-0). NaN gives +0: a
// caller that can see NaN must refuse it first (quantize_weight does).
OASR_HD inline uint8_t float_to_e2m1(float value) {
  const uint32_t bits = float_bits(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 28) & 0x8u);
  const float magnitude = bits_float(bits & 0x7fffffffu);
  if (!(magnitude == magnitude)) return 0;
  // The midpoints between neighbouring codes; at a tie the comparison picks
  // the even code (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2,
  // 3.5 -> 4, 5 -> 4).
  uint8_t code;
  if (magnitude <= 0.25f) {
    code = 0;
  } else if (magnitude < 0.75f) {
    code = 1;
  } else if (magnitude <= 1.25f) {
    code = 2;
  } else if (magnitude < 1.75f) {
    code = 3;
  } else if (magnitude <= 2.5f) {
    code = 4;
  } else if (magnitude < 3.5f) {
    code = 5;
  } else if (magnitude <= 5.0f) {
    code = 6;
  } else {
    code = 7;
  }
  return static_cast<uint8_t>(sign | code);
}

// Two codes in one byte: `even` (element 2j) low, `odd` (element 2j+1) high.
OASR_HD inline uint8_t pack_e2m1_pair(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even & 0xfu) | ((odd & 0xfu) << 4));
}
OASR_HD inline uint8_t unpack_e2m1(uint8_t byte, int64_t k) {
  return (k & 1) == 0 ? static_cast<uint8_t>(byte & 0xfu) : static_cast<uint8_t>(byte >> 4);
}

// Where the block scales live.
//   kLinear  [N, K/16] row-major: scale (n, b) at n * K/16 + b. The reference
//            layout (CPU, small tests).
//   k128x4   the layout of NVIDIA's block-scaled GEMMs (cuBLASLt's
//            VEC16_UE4M3 scale mode, CUTLASS's Sm1xxBlockScaledConfig):
//            padded to [round_up(N, 128), round_up(K/16, 4)] with zeros and
//            cut into 128 x 4 tiles of 512 bytes, tiles ordered row-major
//            (all the K tiles of rows 0..127 first). Inside a tile, row r and
//            block column c sit at (r % 32) * 16 + (r / 32) * 4 + c, i.e. the
//            four 32-row quarters of the tile are interleaved so that one
//            16-byte line holds the 4 scales of rows r, r+32, r+64, r+96.
//            This follows CUTLASS's SfKMajorAtom (shape ((32,4),(16,4)),
//            stride ((16,4),(0,1)), tiled K-first by tile_to_shape with
//            Step<_2,_1>) in include/cutlass/detail/sm100_blockscaled_layout.hpp
//            and the "128x4" scale-factor layout described in the cuDNN
//            frontend and cuBLAS documentation.
enum class ScaleLayout { kLinear, k128x4 };

std::string_view to_string(ScaleLayout layout);         // "linear", "128x4"
ScaleLayout parse_scale_layout(std::string_view name);  // refuses other names

OASR_HD inline int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The stored shape of the block scales of an [n, k] weight.
Shape block_scale_shape(ScaleLayout layout, int64_t n, int64_t k);

// Offset of scale (row, block_col) inside the 128x4 layout whose padded
// width is `padded_block_cols` (a multiple of 4).
OASR_HD inline int64_t scale_offset_128x4(int64_t row, int64_t block_col,
                                          int64_t padded_block_cols) {
  const int64_t tile = (row / 128) * (padded_block_cols / 4) + block_col / 4;
  const int64_t r = row % 128;
  return tile * 512 + (r % 32) * 16 + (r / 32) * 4 + block_col % 4;
}

// Converts block scales between the layouts (float8_e4m3fn tensors):
// linear [N, K/16] -> 128x4 (padding zero-filled) and back (padding dropped;
// `n` and `k` give the logical size).
Tensor swizzle_block_scales(const Tensor& linear);
Tensor unswizzle_block_scales(const Tensor& swizzled, int64_t n, int64_t k);

// A quantized weight, as a future Nvfp4 method would store it.
struct Nvfp4Weight {
  int64_t n = 0;
  int64_t k = 0;
  Tensor packed;       // uint8 [n, k/2]
  Tensor block_scale;  // float8_e4m3fn, block_scale_shape(layout, n, k)
  float global_scale = 0.0f;
  ScaleLayout layout = ScaleLayout::kLinear;
};

// Reference quantization of a float32 [N, K] weight (K % 16 == 0, every
// value finite). fp32 throughout, each operation rounded to nearest even:
//   amax   = max(max |w|, 1e-8)
//   global = amax / (6 * 448)                       (6 * 448 = 2688, exact)
//   per block of 16 along K:
//     s    = e4m3_rne_sat((bamax / 6) / global)    bamax = max |w| in the block
//     d    = float(s) * global                      the block's dequant step
//     q_i  = e2m1_rne_sat(w_i / d), or +0 for every i when d == 0
// so the largest block maps its largest value near ±6 with a scale near 448.
Nvfp4Weight quantize_weight(const Tensor& weight, ScaleLayout layout = ScaleLayout::kLinear);

// value(n, k) = e2m1(q) * (float(s) * global): the same d as quantize_weight,
// so a weight made of representable values round-trips exactly.
Tensor dequantize_weight(const Nvfp4Weight& weight);

}  // namespace oasr::quant::nvfp4
