#include "quant/nvfp4.h"

#include <cmath>

#include "core/activations.h"
#include "core/error.h"
#include "core/float_types.h"
#include "quant/numerics.h"

namespace oasr::quant::nvfp4 {

namespace {

using act::detail::abs_f32;
using act::detail::div_rn;
using act::detail::mul_rn;

void check_weight_shape(int64_t n, int64_t k, const char* what) {
  OASR_CHECK(n > 0 && k > 0, kInvalidArgument, what,
             ": an NVFP4 weight needs N > 0 and K > 0, got [", n, ", ", k, "]");
  OASR_CHECK(k % kBlockSize == 0, kInvalidArgument, what, ": NVFP4 needs K to be a multiple of ",
             kBlockSize, " (one e4m3 scale per ", kBlockSize, " values along K), got K = ", k);
}

// The dequantization step of one block: float(s) * global.
float block_step(uint8_t scale_bits, float global_scale) {
  return mul_rn(e4m3_bits_to_f32(scale_bits), global_scale);
}

}  // namespace

std::string_view to_string(ScaleLayout layout) {
  return layout == ScaleLayout::kLinear ? "linear" : "128x4";
}

ScaleLayout parse_scale_layout(std::string_view name) {
  if (name == "linear") return ScaleLayout::kLinear;
  if (name == "128x4") return ScaleLayout::k128x4;
  OASR_THROW(kInvalidArgument, "unknown NVFP4 scale layout '", name,
             "'; known layouts: linear, 128x4");
}

Shape block_scale_shape(ScaleLayout layout, int64_t n, int64_t k) {
  check_weight_shape(n, k, "block_scale_shape");
  const int64_t blocks = k / kBlockSize;
  if (layout == ScaleLayout::kLinear) return {n, blocks};
  return {round_up(n, 128), round_up(blocks, 4)};
}

Tensor swizzle_block_scales(const Tensor& linear) {
  OASR_CHECK(linear.defined() && linear.dtype() == DType::kF8E4M3 && linear.dim() == 2,
             kInvalidArgument,
             "swizzle_block_scales: expected float8_e4m3fn [N, K/16] scales, got ",
             linear.defined() ? linear.str() : std::string("an undefined tensor"));
  const Tensor source = linear.to(Device::cpu()).contiguous();
  const int64_t n = source.size(0);
  const int64_t blocks = source.size(1);
  const Shape shape = block_scale_shape(ScaleLayout::k128x4, n, blocks * kBlockSize);
  Tensor out = Tensor::zeros(shape, DType::kF8E4M3);
  const auto* in_bits = reinterpret_cast<const uint8_t*>(source.raw_data());
  auto* out_bits = reinterpret_cast<uint8_t*>(out.raw_data());
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < blocks; ++col) {
      out_bits[scale_offset_128x4(row, col, shape[1])] = in_bits[row * blocks + col];
    }
  }
  return out;
}

Tensor unswizzle_block_scales(const Tensor& swizzled, int64_t n, int64_t k) {
  const Shape expected = block_scale_shape(ScaleLayout::k128x4, n, k);
  OASR_CHECK(
      swizzled.defined() && swizzled.dtype() == DType::kF8E4M3 && swizzled.shape() == expected,
      kInvalidArgument, "unswizzle_block_scales: expected float8_e4m3fn", shape_str(expected),
      " scales for an [", n, ", ", k, "] weight, got ",
      swizzled.defined() ? swizzled.str() : std::string("an undefined tensor"));
  const Tensor source = swizzled.to(Device::cpu()).contiguous();
  const int64_t blocks = k / kBlockSize;
  Tensor out = Tensor::empty({n, blocks}, DType::kF8E4M3);
  const auto* in_bits = reinterpret_cast<const uint8_t*>(source.raw_data());
  auto* out_bits = reinterpret_cast<uint8_t*>(out.raw_data());
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < blocks; ++col) {
      out_bits[row * blocks + col] = in_bits[scale_offset_128x4(row, col, expected[1])];
    }
  }
  return out;
}

Nvfp4Weight quantize_weight(const Tensor& weight, ScaleLayout layout) {
  OASR_CHECK(weight.defined() && weight.dtype() == DType::kF32 && weight.dim() == 2,
             kInvalidArgument, "nvfp4::quantize_weight: expected a float32 [N, K] weight, got ",
             weight.defined() ? weight.str() : std::string("an undefined tensor"));
  const int64_t n = weight.size(0);
  const int64_t k = weight.size(1);
  check_weight_shape(n, k, "nvfp4::quantize_weight");
  const Tensor source = weight.to(Device::cpu()).contiguous();
  const float* w = source.data<float>();

  float amax = 0.0f;
  for (int64_t i = 0; i < n * k; ++i) {
    OASR_CHECK(std::isfinite(w[i]), kInvalidArgument,
               "nvfp4::quantize_weight: the weight holds a non-finite value at [", i / k, ", ",
               i % k, "]; NVFP4 has no infinity or NaN, fix the checkpoint");
    const float magnitude = abs_f32(w[i]);
    if (magnitude > amax) amax = magnitude;
  }
  if (amax < kAmaxFloor) amax = kAmaxFloor;

  Nvfp4Weight out;
  out.n = n;
  out.k = k;
  out.layout = layout;
  out.global_scale = div_rn(amax, kE2m1Max * kE4m3Max);
  out.packed = Tensor::zeros({n, k / 2}, DType::kU8);
  const int64_t blocks = k / kBlockSize;
  Tensor linear_scales = Tensor::zeros({n, blocks}, DType::kF8E4M3);
  auto* scale_bits = reinterpret_cast<uint8_t*>(linear_scales.raw_data());
  uint8_t* packed = out.packed.data<uint8_t>();

  uint8_t codes[kBlockSize];
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t block = 0; block < blocks; ++block) {
      const float* x = w + row * k + block * kBlockSize;
      float block_amax = 0.0f;
      for (int64_t i = 0; i < kBlockSize; ++i) {
        const float magnitude = abs_f32(x[i]);
        if (magnitude > block_amax) block_amax = magnitude;
      }
      const uint8_t scale =
          f32_to_e4m3_bits(div_rn(div_rn(block_amax, kE2m1Max), out.global_scale));
      scale_bits[row * blocks + block] = scale;
      const float step = block_step(scale, out.global_scale);
      for (int64_t i = 0; i < kBlockSize; ++i) {
        codes[i] = step == 0.0f ? 0 : float_to_e2m1(div_rn(x[i], step));
      }
      uint8_t* dst = packed + row * (k / 2) + block * (kBlockSize / 2);
      for (int64_t i = 0; i < kBlockSize / 2; ++i) {
        dst[i] = pack_e2m1_pair(codes[2 * i], codes[2 * i + 1]);
      }
    }
  }
  out.block_scale =
      layout == ScaleLayout::kLinear ? linear_scales : swizzle_block_scales(linear_scales);
  return out;
}

Tensor dequantize_weight(const Nvfp4Weight& weight) {
  check_weight_shape(weight.n, weight.k, "nvfp4::dequantize_weight");
  const int64_t n = weight.n;
  const int64_t k = weight.k;
  OASR_CHECK(weight.packed.defined() && weight.packed.dtype() == DType::kU8 &&
                 weight.packed.shape() == Shape({n, k / 2}),
             kInvalidArgument, "nvfp4::dequantize_weight: packed must be uint8[", n, ", ", k / 2,
             "], got ", weight.packed.defined() ? weight.packed.str() : std::string("undefined"));
  const Tensor scales = weight.layout == ScaleLayout::kLinear
                            ? weight.block_scale.to(Device::cpu()).contiguous()
                            : unswizzle_block_scales(weight.block_scale, n, k);
  const int64_t blocks = k / kBlockSize;
  OASR_CHECK(scales.dtype() == DType::kF8E4M3 && scales.shape() == Shape({n, blocks}),
             kInvalidArgument, "nvfp4::dequantize_weight: block_scale must be float8_e4m3fn[", n,
             ", ", blocks, "] in the linear layout, got ", scales.str());
  const Tensor packed = weight.packed.to(Device::cpu()).contiguous();
  const uint8_t* bytes = packed.data<uint8_t>();
  const auto* scale_bits = reinterpret_cast<const uint8_t*>(scales.raw_data());
  Tensor out = Tensor::empty({n, k}, DType::kF32);
  float* values = out.data<float>();
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < k; ++col) {
      const float step =
          block_step(scale_bits[row * blocks + col / kBlockSize], weight.global_scale);
      const uint8_t code = unpack_e2m1(bytes[row * (k / 2) + col / 2], col);
      values[row * k + col] = mul_rn(e2m1_to_float(code), step);
    }
  }
  return out;
}

}  // namespace oasr::quant::nvfp4
