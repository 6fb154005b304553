#include "ops/depthwise_conv1d.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/depthwise_conv1d.h"
#include "ops/cuda/depthwise_conv1d.h"
#include "ops/front_checks.h"
#include "ops/glu.h"

namespace oasr::ops {

namespace {

// The checks both fronts share: x and weight defined, float, rank 3, one
// device (returned).
Device checked_device(const char* kOp, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "weight", weight);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  detail::check_float(kOp, "x", x, device);
  detail::check_float(kOp, "weight", weight, device);
  detail::check_rank(kOp, "x", x, 3);
  detail::check_rank(kOp, "weight", weight, 3);
  return device;
}

// Checks the padding, the kernel against the padded length and the bias,
// and returns the output length.
int64_t checked_out_length(const char* kOp, const Tensor& x, const Tensor& weight,
                           const Tensor& bias, Device device, int64_t channels, int64_t length,
                           int64_t pad_left, int64_t pad_right) {
  const int64_t kernel = weight.size(2);
  OASR_CHECK(pad_left >= 0 && pad_right >= 0, kInvalidArgument, kOp,
             ": padding must be >= 0, got (left ", pad_left, ", right ", pad_right, ")");
  const int64_t padded = length + pad_left + pad_right;
  OASR_CHECK(padded >= kernel, kInvalidArgument, kOp, ": kernel size ", kernel,
             " is larger than the padded input length ", padded, " (T=", length, " + left ",
             pad_left, " + right ", pad_right, ")");
  if (bias.defined()) {
    detail::check_float(kOp, "bias", bias, device);
    OASR_CHECK(bias.dim() == 1 && bias.size(0) == channels, kInvalidArgument, kOp,
               ": bias must be [", channels, "], got ", shape_str(bias.shape()));
  }
  detail::check_same_dtype(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  return padded - kernel + 1;
}

}  // namespace

Tensor depthwise_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t pad_left,
                        int64_t pad_right) {
  constexpr const char* kOp = "depthwise_conv1d";
  const Device device = checked_device(kOp, x, weight, bias);
  const int64_t batch = x.size(0);
  const int64_t channels = x.size(1);
  const int64_t length = x.size(2);
  const int64_t kernel = weight.size(2);
  OASR_CHECK(weight.size(0) == channels && weight.size(1) == 1, kInvalidArgument, kOp,
             ": weight must be [C, 1, K] with C=", channels, " (the channels of x ",
             shape_str(x.shape()), "), got ", shape_str(weight.shape()));
  OASR_CHECK(kernel >= 1, kInvalidArgument, kOp, ": weight ", shape_str(weight.shape()),
             " has an empty kernel");
  const int64_t out_length =
      checked_out_length(kOp, x, weight, bias, device, channels, length, pad_left, pad_right);
  Tensor out = Tensor::empty({batch, channels, out_length}, x.dtype(), device);
  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.contiguous();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  on_device(
      kOp, device,
      [&] {
        cpu::depthwise_conv1d_f32(x_c.data<float>(), weight_c.data<float>(),
                                  bias_c.defined() ? bias_c.data<float>() : nullptr,
                                  out.data<float>(), batch, channels, length, kernel, pad_left,
                                  out_length);
      },
      [&](auto on) {
        cuda::depthwise_conv1d(x_c.raw_data(), weight_c.raw_data(),
                               bias_c.defined() ? bias_c.raw_data() : nullptr, out.raw_data(),
                               x.dtype(), on.device_index, batch, channels, length, kernel,
                               pad_left, out_length);
      });
  return out;
}

Tensor glu_depthwise_conv1d_channels_last(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          int64_t pad_left, int64_t pad_right) {
  constexpr const char* kOp = "glu_depthwise_conv1d_channels_last";
  const Device device = checked_device(kOp, x, weight, bias);
  const int64_t batch = x.size(0);
  const int64_t length = x.size(1);
  const int64_t channels = weight.size(0);
  const int64_t kernel = weight.size(2);
  OASR_CHECK(x.size(2) == 2 * channels && weight.size(1) == 1 && kernel >= 1, kInvalidArgument, kOp,
             ": x must be [B, T, 2C] for weight [C, 1, K]; got x ", shape_str(x.shape()),
             " and weight ", shape_str(weight.shape()));
  const int64_t out_length =
      checked_out_length(kOp, x, weight, bias, device, channels, length, pad_left, pad_right);
  // The composition the fused CUDA kernel and the CPU channels-last body
  // equal bit for bit; the CUDA body beyond the fused kernel's tile.
  const auto composed = [&] {
    const Tensor gated = glu(x, -1).transpose(1, 2).contiguous();
    return depthwise_conv1d(gated, weight, bias, pad_left, pad_right).transpose(1, 2).contiguous();
  };
  const auto channels_last_cpu = [&] {
    const Tensor gated = glu(x, -1);  // [B, T, C], contiguous
    Tensor out = Tensor::empty({batch, out_length, channels}, x.dtype(), device);
    const Tensor weight_c = weight.contiguous();
    const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
    cpu::depthwise_conv1d_channels_last_f32(gated.data<float>(), weight_c.data<float>(),
                                            bias_c.defined() ? bias_c.data<float>() : nullptr,
                                            out.data<float>(), batch, channels, length, kernel,
                                            pad_left, out_length);
    return out;
  };
  return on_device(kOp, device, channels_last_cpu, [&](auto on) {
    if (kernel > cuda::kMaxGluKernel || length >= (int64_t{1} << 30) || batch > 65535) {
      return composed();
    }
    Tensor out = Tensor::empty({batch, out_length, channels}, x.dtype(), device);
    const Tensor x_c = x.contiguous();
    const Tensor weight_c = weight.contiguous();
    const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
    cuda::glu_depthwise_conv1d_channels_last(x_c.raw_data(), weight_c.raw_data(),
                                             bias_c.defined() ? bias_c.raw_data() : nullptr,
                                             out.raw_data(), x.dtype(), on.device_index, batch,
                                             channels, length, kernel, pad_left, out_length);
    return out;
  });
}

}  // namespace oasr::ops
