#include "ops/depthwise_conv2d.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/depthwise_conv2d.h"
#include "ops/cuda/depthwise_conv2d.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor depthwise_conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const DepthwiseConv2dOptions& options) {
  constexpr const char* kOp = "depthwise_conv2d";
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "weight", weight);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  detail::check_float(kOp, "x", x, device);
  detail::check_float(kOp, "weight", weight, device);
  detail::check_rank(kOp, "x", x, 4);
  detail::check_rank(kOp, "weight", weight, 4);
  cpu::DepthwiseConv2dShape s{};
  s.batch = x.size(0);
  s.channels = x.size(1);
  s.in_h = x.size(2);
  s.in_w = x.size(3);
  s.kernel_h = weight.size(2);
  s.kernel_w = weight.size(3);
  s.stride_h = options.stride_h;
  s.stride_w = options.stride_w;
  s.pad_h = options.padding_h;
  s.pad_w = options.padding_w;
  OASR_CHECK(
      weight.size(0) == s.channels && weight.size(1) == 1 && s.kernel_h >= 1 && s.kernel_w >= 1,
      kInvalidArgument, kOp, ": weight must be [C, 1, KH, KW] with C=", s.channels,
      " (the channels of x ", shape_str(x.shape()), "), got ", shape_str(weight.shape()));
  OASR_CHECK(s.stride_h >= 1 && s.stride_w >= 1 && s.pad_h >= 0 && s.pad_w >= 0, kInvalidArgument,
             kOp, ": strides must be >= 1 and padding >= 0, got stride (", s.stride_h, ", ",
             s.stride_w, ") padding (", s.pad_h, ", ", s.pad_w, ")");
  const int64_t padded_h = s.in_h + 2 * s.pad_h;
  const int64_t padded_w = s.in_w + 2 * s.pad_w;
  OASR_CHECK(padded_h >= s.kernel_h && padded_w >= s.kernel_w, kInvalidArgument, kOp, ": kernel (",
             s.kernel_h, ", ", s.kernel_w, ") is larger than the padded input (", padded_h, ", ",
             padded_w, ") of x ", shape_str(x.shape()));
  if (bias.defined()) {
    detail::check_float(kOp, "bias", bias, device);
    OASR_CHECK(bias.dim() == 1 && bias.size(0) == s.channels, kInvalidArgument, kOp,
               ": bias must be [", s.channels, "], got ", shape_str(bias.shape()));
  }
  detail::check_same_dtype(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  s.out_h = (padded_h - s.kernel_h) / s.stride_h + 1;
  s.out_w = (padded_w - s.kernel_w) / s.stride_w + 1;
  Tensor out = Tensor::empty({s.batch, s.channels, s.out_h, s.out_w}, x.dtype(), device);
  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.contiguous();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  on_device(
      kOp, device,
      [&] {
        cpu::depthwise_conv2d_f32(x_c.data<float>(), weight_c.data<float>(),
                                  bias_c.defined() ? bias_c.data<float>() : nullptr,
                                  out.data<float>(), s);
      },
      [&](auto on) {
        cuda::depthwise_conv2d(x_c.raw_data(), weight_c.raw_data(),
                               bias_c.defined() ? bias_c.raw_data() : nullptr, out.raw_data(),
                               x.dtype(), on.device_index, s);
      });
  return out;
}

}  // namespace oasr::ops
