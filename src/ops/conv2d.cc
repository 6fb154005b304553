#include "ops/conv2d.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/conv2d.h"
#include "ops/cuda/conv2d.h"
#include "ops/front_checks.h"

namespace oasr::ops {

namespace {

// The checked geometry of one convolution; `nhwc` says x is [N, H, W, Cin].
cpu::Conv2dShape checked_shape(const char* kOp, const Tensor& x, const Tensor& weight,
                               const Tensor& bias, const Conv2dOptions& options, bool nhwc) {
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "weight", weight);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  detail::check_float(kOp, "x", x, device);
  detail::check_float(kOp, "weight", weight, device);
  detail::check_rank(kOp, "x", x, 4);
  detail::check_rank(kOp, "weight", weight, 4);
  OASR_CHECK(options.groups == 1, kUnsupported, kOp, ": groups=", options.groups,
             " is not served (only groups=1); a depthwise 1-d convolution is "
             "ops::depthwise_conv1d");
  OASR_CHECK(options.stride_h >= 1 && options.stride_w >= 1, kInvalidArgument, kOp,
             ": strides must be >= 1, got (", options.stride_h, ", ", options.stride_w, ")");
  OASR_CHECK(options.padding_h >= 0 && options.padding_w >= 0, kInvalidArgument, kOp,
             ": padding must be >= 0, got (", options.padding_h, ", ", options.padding_w, ")");

  cpu::Conv2dShape shape;
  shape.batch = x.size(0);
  shape.in_channels = x.size(nhwc ? 3 : 1);
  shape.in_h = x.size(nhwc ? 1 : 2);
  shape.in_w = x.size(nhwc ? 2 : 3);
  shape.out_channels = weight.size(0);
  shape.kernel_h = weight.size(2);
  shape.kernel_w = weight.size(3);
  shape.stride_h = options.stride_h;
  shape.stride_w = options.stride_w;
  shape.pad_h = options.padding_h;
  shape.pad_w = options.padding_w;
  OASR_CHECK(weight.size(1) == shape.in_channels, kInvalidArgument, kOp, ": weight ",
             shape_str(weight.shape()), " ([Cout, Cin, KH, KW]) expects Cin=", weight.size(1),
             " but x ", shape_str(x.shape()), " has ", shape.in_channels, " channels");
  OASR_CHECK(shape.in_channels >= 1 && shape.kernel_h >= 1 && shape.kernel_w >= 1, kInvalidArgument,
             kOp, ": weight ", shape_str(weight.shape()),
             " has an empty input-channel or kernel dimension");
  const int64_t padded_h = shape.in_h + 2 * shape.pad_h;
  const int64_t padded_w = shape.in_w + 2 * shape.pad_w;
  OASR_CHECK(padded_h >= shape.kernel_h && padded_w >= shape.kernel_w, kInvalidArgument, kOp,
             ": kernel (", shape.kernel_h, ", ", shape.kernel_w,
             ") is larger than the padded input (", padded_h, ", ", padded_w, ") of x ",
             shape_str(x.shape()));
  if (bias.defined()) {
    detail::check_float(kOp, "bias", bias, device);
    OASR_CHECK(bias.dim() == 1 && bias.size(0) == shape.out_channels, kInvalidArgument, kOp,
               ": bias must be [", shape.out_channels, "] to match weight ",
               shape_str(weight.shape()), ", got ", shape_str(bias.shape()));
  }
  shape.out_h = (padded_h - shape.kernel_h) / shape.stride_h + 1;
  shape.out_w = (padded_w - shape.kernel_w) / shape.stride_w + 1;

  detail::check_same_dtype(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  return shape;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options) {
  constexpr const char* kOp = "conv2d";
  const cpu::Conv2dShape shape = checked_shape(kOp, x, weight, bias, options, /*nhwc=*/false);
  const Device device = x.device();

  Tensor out =
      Tensor::empty({shape.batch, shape.out_channels, shape.out_h, shape.out_w}, x.dtype(), device);
  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.contiguous();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  on_device(
      kOp, device,
      [&] {
        cpu::conv2d_f32(x_c.data<float>(), weight_c.data<float>(),
                        bias_c.defined() ? bias_c.data<float>() : nullptr, out.data<float>(),
                        shape);
      },
      [&](auto) { cuda::conv2d(x_c, weight_c, bias_c, out, shape); });
  return out;
}

Tensor flatten_nhwc_channel_major(const Tensor& y) {
  constexpr const char* kOp = "flatten_nhwc_channel_major";
  detail::check_defined(kOp, "y", y);
  detail::check_rank(kOp, "y", y, 4);
  const Shape flat{y.size(0), y.size(1), y.size(3) * y.size(2)};
  const auto copy_transposed = [&] { return y.transpose(2, 3).contiguous().view(flat); };
  return on_device(kOp, y.device(), copy_transposed, [&](auto) {
    if (y.size(2) * y.size(3) >= (int64_t{1} << 31)) return copy_transposed();
    Tensor out = Tensor::empty(flat, y.dtype(), y.device());
    cuda::flatten_channel_major(y.contiguous(), out);
    return out;
  });
}

bool conv2d_nhwc_served(const Tensor& x, const Tensor& weight) {
  if (!x.defined() || !weight.defined() || x.dim() != 4 || weight.dim() != 4) return false;
  return on_device(
      "conv2d_nhwc", x.device(), [] { return false; },
      [&](auto) {
        return cuda::conv2d_nhwc_served(x.size(3), weight.size(0), weight.size(2), weight.size(3),
                                        x.dtype());
      });
}

Tensor conv2d_nhwc(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Conv2dOptions& options, bool relu) {
  constexpr const char* kOp = "conv2d_nhwc";
  const cpu::Conv2dShape shape = checked_shape(kOp, x, weight, bias, options, /*nhwc=*/true);
  OASR_CHECK(conv2d_nhwc_served(x, weight), kUnsupported, kOp,
             ": served on CUDA for float16/bfloat16/float32 with Cout a multiple of 8 and either "
             "Cin a multiple of 8 or a patch of at most 32 taps (KH * KW * Cin, with "
             "taps * Cout <= 8192); got x ",
             x.str(), " and weight ", weight.str(), " (use ops::conv2d on NCHW)");
  Tensor out = Tensor::empty({shape.batch, shape.out_h, shape.out_w, shape.out_channels}, x.dtype(),
                             x.device());
  // conv2d_nhwc_served() refused every device but CUDA above.
  on_device(
      kOp, x.device(), [&] { OASR_THROW(kInternal, kOp, ": no CPU body"); },
      [&](auto) {
        // [Cout, Cin, KH, KW] -> [Cout, KH, KW, Cin]: the patch order of NHWC rows.
        const Tensor weight_krsc =
            weight.contiguous()
                .view({shape.out_channels, shape.in_channels, shape.kernel_h * shape.kernel_w})
                .transpose(1, 2)
                .contiguous();
        cuda::conv2d_nhwc(x.contiguous(), weight_krsc,
                          bias.defined() ? bias.contiguous() : Tensor(), out, shape, relu);
      });
  return out;
}

}  // namespace oasr::ops
