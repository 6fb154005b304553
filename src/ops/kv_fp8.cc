#include "ops/kv_fp8.h"

#include <algorithm>
#include <cmath>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "core/float_types.h"
#include "ops/cuda/kv_fp8.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Pow2E4m3 quantize_pow2_e4m3(const Tensor& x) {
  constexpr const char* kOp = "quantize_pow2_e4m3";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}});
  detail::check_float(kOp, "x", x, device);
  detail::check_rank(kOp, "x", x, 2);
  const int64_t n = x.size(0);
  const int64_t d = x.size(1);
  Pow2E4m3 out{Tensor::empty({n, d}, DType::kU8, device), Tensor::empty({n}, DType::kF32, device)};
  const Tensor x_c = x.contiguous();
  on_device(
      kOp, device,
      [&] {
        const float* src = x_c.data<float>();
        uint8_t* codes = out.codes.data<uint8_t>();
        float* scales = out.scales.data<float>();
        for (int64_t i = 0; i < n; ++i) {
          float amax = 0.0f;
          for (int64_t j = 0; j < d; ++j) amax = std::max(amax, std::fabs(src[i * d + j]));
          const float scale = e4m3_pow2_scale(amax);
          scales[i] = scale;
          for (int64_t j = 0; j < d; ++j) {
            codes[i * d + j] = f32_to_e4m3_bits(src[i * d + j] / scale);
          }
        }
      },
      [&](auto) { cuda::quantize_pow2_e4m3(x_c, out.codes, out.scales); });
  return out;
}

void quantize_pow2_e4m3_into(const Tensor& x, Tensor codes, Tensor scales) {
  constexpr const char* kOp = "quantize_pow2_e4m3_into";
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "codes", codes);
  detail::check_defined(kOp, "scales", scales);
  const Device device =
      detail::serving_device(kOp, {{"x", x}, {"codes", codes}, {"scales", scales}});
  detail::check_rank(kOp, "x", x, 4);
  const Shape& shape = x.shape();
  const int64_t heads = shape[2];
  const int64_t d = shape[3];
  const auto& cs = codes.strides();
  const auto& ss = scales.strides();
  OASR_CHECK(codes.dtype() == DType::kU8 && codes.shape() == shape &&
                 scales.dtype() == DType::kF32 &&
                 scales.shape() == Shape({shape[0], shape[1], heads, 1}),
             kInvalidArgument, kOp, ": codes must be uint8 ", shape_str(shape),
             " and scales float32 [", shape[0], ", ", shape[1], ", ", heads, ", 1], got ",
             dtype_name(codes.dtype()), " ", shape_str(codes.shape()), " and ",
             dtype_name(scales.dtype()), " ", shape_str(scales.shape()));
  OASR_CHECK(cs[3] == 1 && cs[2] == d && cs[1] == heads * d && ss[2] == 1 && ss[1] == heads,
             kInvalidArgument, kOp,
             ": each row's vectors must be contiguous in codes and scales (strides [*, ", heads * d,
             ", ", d, ", 1] and [*, ", heads, ", 1, *])");
  on_device(
      kOp, device,
      [&] {
        const Pow2E4m3 q = quantize_pow2_e4m3(x.reshape({-1, d}));
        codes.copy_(q.codes.view(shape));
        scales.copy_(q.scales.view(scales.shape()));
      },
      [&](auto) {
        detail::check_float(kOp, "x", x, device);
        cuda::quantize_pow2_e4m3_rows(x.contiguous(), codes, scales);
      });
}

void quantize_pow2_e4m3_at(const Tensor& x, Tensor codes, Tensor scales,
                           const Tensor& past_tokens) {
  constexpr const char* kOp = "quantize_pow2_e4m3_at";
  detail::check_defined(kOp, "x", x);
  detail::check_past_tokens(kOp, past_tokens);
  detail::check_rank(kOp, "x", x, 4);
  detail::check_defined(kOp, "codes", codes);
  detail::check_defined(kOp, "scales", scales);
  const Device device = detail::serving_device(
      kOp, {{"x", x}, {"codes", codes}, {"scales", scales}, {"past_tokens", past_tokens}});
  const int64_t n = x.size(1);
  OASR_CHECK(codes.dim() == 4 && scales.dim() == 4 && codes.size(0) == x.size(0) &&
                 codes.size(1) >= n && scales.size(1) == codes.size(1),
             kInvalidArgument, kOp, ": codes and scales must be stores [", x.size(0),
             ", capacity >= ", n, ", H, *], got ", shape_str(codes.shape()), " and ",
             shape_str(scales.shape()));
  on_device(
      kOp, device,
      [&] {
        const int64_t at = past_tokens.data<int32_t>()[0];
        OASR_CHECK(at >= 0 && at + n <= codes.size(1), kInvalidArgument, kOp, ": tokens ", at, "..",
                   at + n - 1, " are outside the store's ", codes.size(1), " tokens");
        quantize_pow2_e4m3_into(x, codes.narrow(1, at, n), scales.narrow(1, at, n));
      },
      [&](auto) {
        // The shapes and strides quantize_pow2_e4m3_into checks, for the
        // whole store (the window's position is known on the device only).
        const Tensor x_c = x.contiguous();
        OASR_CHECK(
            codes.narrow(1, 0, n).shape() == x.shape() && codes.strides()[3] == 1 &&
                codes.strides()[2] == x.size(3) && codes.strides()[1] == x.size(2) * x.size(3) &&
                scales.shape() == Shape({x.size(0), codes.size(1), x.size(2), 1}) &&
                scales.strides()[2] == 1 && scales.strides()[1] == x.size(2) &&
                codes.dtype() == DType::kU8 && scales.dtype() == DType::kF32,
            kInvalidArgument, kOp, ": codes must be a uint8 store [", x.size(0), ", *, ", x.size(2),
            ", ", x.size(3), "] and scales a float32 store [", x.size(0), ", *, ", x.size(2),
            ", 1], each row's tokens contiguous, got ", codes.str(), " and ", scales.str());
        detail::check_float(kOp, "x", x, device);
        cuda::quantize_pow2_e4m3_rows_at(x_c, codes, scales, past_tokens);
      });
}

Tensor dequantize_pow2_e4m3(const Tensor& codes, const Tensor& scales, DType dtype) {
  constexpr const char* kOp = "dequantize_pow2_e4m3";
  detail::check_defined(kOp, "codes", codes);
  detail::check_defined(kOp, "scales", scales);
  const Device device = detail::serving_device(kOp, {{"codes", codes}, {"scales", scales}});
  OASR_CHECK(codes.dtype() == DType::kU8 && codes.dim() == 2 && scales.dtype() == DType::kF32 &&
                 scales.dim() == 1 && scales.size(0) == codes.size(0),
             kInvalidArgument, kOp, ": codes must be uint8 [N, D] and scales float32 [N], got ",
             dtype_name(codes.dtype()), " ", shape_str(codes.shape()), " and ",
             dtype_name(scales.dtype()), " ", shape_str(scales.shape()));
  OASR_CHECK(device.is_cuda() || dtype == DType::kF32, kInvalidArgument, kOp,
             ": the CPU dequantizes to float32 only, not ", dtype_name(dtype));
  const int64_t n = codes.size(0);
  const int64_t d = codes.size(1);
  Tensor out = Tensor::empty({n, d}, dtype, device);
  const Tensor codes_c = codes.contiguous();
  const Tensor scales_c = scales.contiguous();
  on_device(
      kOp, device,
      [&] {
        const uint8_t* src = codes_c.data<uint8_t>();
        const float* s = scales_c.data<float>();
        float* dst = out.data<float>();
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < d; ++j) dst[i * d + j] = e4m3_bits_to_f32(src[i * d + j]) * s[i];
        }
      },
      [&](auto) { cuda::dequantize_pow2_e4m3(codes_c, scales_c, out); });
  return out;
}

}  // namespace oasr::ops
