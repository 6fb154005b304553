#include "layers/conv1d.h"

#include "core/error.h"
#include "ops/activation.h"
#include "ops/conv2d.h"
#include "quant/number_format.h"

namespace oasr::layers {

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               int64_t padding, bool bias, Activation activation)
    : Module(activation == Activation::kNone ? "Conv1d" : "Conv1dActivation"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      stride_(stride),
      padding_(padding),
      has_bias_(bias),
      activation_(activation) {
  OASR_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0 && stride > 0 && padding >= 0,
             kInvalidArgument, "Conv1d: in_channels, out_channels, kernel_size and stride must be ",
             "positive and padding non-negative, got ", in_channels, ", ", out_channels, ", ",
             kernel_size, ", ", stride, ", ", padding);
  register_parameter("weight", {out_channels, in_channels, kernel_size});
  if (bias) register_parameter("bias", {out_channels});
}

int64_t Conv1d::output_length(int64_t input_length) const {
  return (input_length + 2 * padding_ - kernel_size_) / stride_ + 1;
}

void Conv1d::check_input(const Tensor& x) const {
  OASR_CHECK(x.defined() && x.dim() == 3 && x.size(1) == in_channels_, kInvalidArgument,
             type_name(), " '", path(), "': input must be [B, ", in_channels_, ", T], got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  OASR_CHECK(x.size(2) + 2 * padding_ >= kernel_size_, kInvalidArgument, type_name(), " '", path(),
             "': input of ", x.size(2), " frames is shorter than the kernel (", kernel_size_,
             ") with padding ", padding_);
}

Tensor Conv1d::forward(const Tensor& x) const {
  check_input(x);
  observe_input(x);
  if (quantized()) return quantized_forward(x);
  // A height-1 image through conv2d: [B, Cin, 1, T] * [Cout, Cin, 1, K].
  ops::Conv2dOptions options;
  options.stride_w = stride_;
  options.padding_w = padding_;
  const Tensor image = x.contiguous().view({x.size(0), in_channels_, 1, x.size(2)});
  const Tensor weight =
      param("weight").contiguous().view({out_channels_, in_channels_, 1, kernel_size_});
  Tensor y = ops::conv2d(image, weight, has_bias_ ? param("bias") : Tensor(), options);
  y = y.view({y.size(0), out_channels_, y.size(3)});
  if (activation_ != Activation::kNone) ops::activation_inplace(y, activation_);
  return y;
}

quant::GemmGeometry Conv1d::quant_geometry() const {
  quant::GemmGeometry g;
  g.kind = quant::LayerKind::kConv1d;
  g.in_features = in_channels_;
  g.out_features = out_channels_;
  g.groups = 1;
  g.quantized_weight_shape = {out_channels_, kernel_size_, in_channels_};
  return g;
}

std::string Conv1d::quant_refusal(const quant::QuantScheme& scheme) const {
  if (!quant::number_format(scheme.weight.dtype).serves_convolution) {
    return "convolutions are " + quant::convolution_format_names() + " only (scheme " +
           scheme.name + ")";
  }
  return gemm_alignment_refusal(in_channels_, out_channels_, "in_channels", "out_channels");
}

Tensor Conv1d::fp_weight_matrix() const {
  // [Cout, Cin, K] -> [Cout, K, Cin]: the GEMM's K runs over (tap, channel),
  // the order quantized_forward gathers a receptive field in.
  const Tensor w = param("weight").to(DType::kF32).contiguous();
  Tensor out = Tensor::empty({out_channels_, kernel_size_ * in_channels_}, DType::kF32);
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t o = 0; o < out_channels_; ++o) {
    for (int64_t c = 0; c < in_channels_; ++c) {
      for (int64_t k = 0; k < kernel_size_; ++k) {
        dst[(o * kernel_size_ + k) * in_channels_ + c] =
            src[(o * in_channels_ + c) * kernel_size_ + k];
      }
    }
  }
  return out;
}

// Each output frame's receptive field (zeros in the padding) becomes one row
// of the method's static-input GEMM. Quantizing the rows equals quantizing
// the input first: one static scale for every element, and a zero pad
// quantizes to zero.
Tensor Conv1d::quantized_forward(const Tensor& x) const {
  const int64_t batch = x.size(0);
  const int64_t length = x.size(2);
  const int64_t out_t = output_length(length);
  const Tensor image = x.contiguous().view({batch, in_channels_, 1, length});
  const ConvPatches patches{1, kernel_size_, 1, stride_, 0, padding_, 1, out_t};
  // [B*T', Cout] -> [B, T', Cout] -> [B, Cout, T']
  return quant_forward_conv(image, patches, activation_)
      .view({batch, out_t, out_channels_})
      .transpose(1, 2)
      .contiguous();
}

}  // namespace oasr::layers
