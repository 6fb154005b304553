#include "layers/conv.h"

#include "core/error.h"
#include "ops/depthwise_conv1d.h"
#include "ops/embedding.h"
#include "quant/number_format.h"

namespace oasr::layers {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
               int64_t stride_h, int64_t stride_w, bool bias, int64_t padding_h, int64_t padding_w)
    : Module("Conv2d"),
      in_channels_(in_channels),
      kernel_h_(kernel_h),
      kernel_w_(kernel_w),
      out_channels_(out_channels),
      has_bias_(bias) {
  options_.stride_h = stride_h;
  options_.stride_w = stride_w;
  options_.padding_h = padding_h;
  options_.padding_w = padding_w;
  register_parameter("weight", {out_channels, in_channels, kernel_h, kernel_w});
  if (bias) register_parameter("bias", {out_channels});
}

Tensor Conv2d::forward(const Tensor& x) const {
  observe_input(x);
  if (quantized()) return quantized_forward(x);
  return ops::conv2d(x, param("weight"), has_bias_ ? param("bias") : Tensor(), options_);
}

bool Conv2d::nhwc_served(const Tensor& x) const {
  return !quantized() && !observed() && ops::conv2d_nhwc_served(x, param("weight"));
}

Tensor Conv2d::forward_nhwc_relu(const Tensor& x) const {
  OASR_CHECK(nhwc_served(x), kInternal, path(),
             ": the channels-last forward serves a full-precision CUDA layer only, got x ",
             x.str());
  return ops::conv2d_nhwc(x, param("weight"), has_bias_ ? param("bias") : Tensor(), options_,
                          /*relu=*/true);
}

quant::GemmGeometry Conv2d::quant_geometry() const {
  quant::GemmGeometry g;
  g.kind = quant::LayerKind::kConv2d;
  g.in_features = in_channels_;
  g.out_features = out_channels_;
  g.groups = options_.groups;
  g.quantized_weight_shape = {out_channels_, kernel_h_, kernel_w_, in_channels_};
  return g;
}

std::string Conv2d::quant_refusal(const quant::QuantScheme& scheme) const {
  if (!quant::number_format(scheme.weight.dtype).serves_convolution) {
    return "convolutions are " + quant::convolution_format_names() + " only (scheme " +
           scheme.name + ")";
  }
  if (options_.groups != 1) return "a grouped convolution (groups != 1)";
  return gemm_alignment_refusal(in_channels_, out_channels_, "in_channels", "out_channels");
}

Tensor Conv2d::fp_weight_matrix() const {
  // [Cout, Cin, KH, KW] -> [Cout, KH, KW, Cin]: the GEMM's K runs over
  // (row, column, channel), the order quantized_forward gathers patches in.
  const Tensor w = param("weight").to(DType::kF32).contiguous();
  Tensor out = Tensor::empty({out_channels_, kernel_h_ * kernel_w_ * in_channels_}, DType::kF32);
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t o = 0; o < out_channels_; ++o) {
    for (int64_t c = 0; c < in_channels_; ++c) {
      for (int64_t r = 0; r < kernel_h_; ++r) {
        for (int64_t s = 0; s < kernel_w_; ++s) {
          dst[((o * kernel_h_ + r) * kernel_w_ + s) * in_channels_ + c] =
              src[((o * in_channels_ + c) * kernel_h_ + r) * kernel_w_ + s];
        }
      }
    }
  }
  return out;
}

// Gathers each output pixel's receptive field (zeros where it reaches into
// the padding) and runs the method's static-input GEMM over the patches.
// Quantizing the patches equals quantizing the input first: the static scale
// is the same for every element and a zero pad quantizes to zero.
Tensor Conv2d::quantized_forward(const Tensor& x) const {
  OASR_CHECK(x.dim() == 4 && x.size(1) == in_channels_, kInvalidArgument, "quantized Conv2d '",
             path(), "': input must be [B, ", in_channels_, ", H, W], got ", shape_str(x.shape()));
  const int64_t batch = x.size(0);
  const int64_t height = x.size(2);
  const int64_t width = x.size(3);
  const int64_t out_h = (height + 2 * options_.padding_h - kernel_h_) / options_.stride_h + 1;
  const int64_t out_w = (width + 2 * options_.padding_w - kernel_w_) / options_.stride_w + 1;
  OASR_CHECK(out_h > 0 && out_w > 0, kInvalidArgument, "quantized Conv2d '", path(), "': input ",
             shape_str(x.shape()), " is smaller than the ", kernel_h_, "x", kernel_w_, " kernel");
  const ConvPatches patches{kernel_h_,
                            kernel_w_,
                            options_.stride_h,
                            options_.stride_w,
                            options_.padding_h,
                            options_.padding_w,
                            out_h,
                            out_w};
  // [B*H'*W', Cout] -> [B, H', W', Cout] -> [B, Cout, H', W']
  return quant_forward_conv(x, patches, Activation::kNone)
      .view({batch, out_h, out_w, out_channels_})
      .transpose(3, 1)
      .transpose(2, 3)
      .contiguous();
}

DepthwiseConv1d::DepthwiseConv1d(int64_t channels, int64_t kernel_size, bool bias)
    : Module("DepthwiseConv1d"), channels_(channels), kernel_size_(kernel_size), has_bias_(bias) {
  register_parameter("weight", {channels, 1, kernel_size});
  if (bias) register_parameter("bias", {channels});
}

Tensor DepthwiseConv1d::forward(const Tensor& x, int64_t pad_left, int64_t pad_right) const {
  return ops::depthwise_conv1d(x, param("weight"), has_bias_ ? param("bias") : Tensor(), pad_left,
                               pad_right);
}

Tensor DepthwiseConv1d::glu_forward_channels_last(const Tensor& x, int64_t pad_left,
                                                  int64_t pad_right) const {
  return ops::glu_depthwise_conv1d_channels_last(
      x, param("weight"), has_bias_ ? param("bias") : Tensor(), pad_left, pad_right);
}

quant::GemmGeometry DepthwiseConv1d::quant_geometry() const {
  quant::GemmGeometry g;
  g.kind = quant::LayerKind::kConv1d;
  g.in_features = channels_;
  g.out_features = channels_;
  g.groups = channels_;
  g.quantized_weight_shape = {channels_, kernel_size_, 1};
  return g;
}

std::string DepthwiseConv1d::quant_refusal(const quant::QuantScheme& /*scheme*/) const {
  return "a depthwise convolution (groups = channels = " + std::to_string(channels_) +
         "), which no 8-bit kernel serves";
}

Tensor DepthwiseConv1d::fp_weight_matrix() const {
  return param("weight").view({channels_, -1});
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim) : Module("Embedding") {
  register_parameter("weight", {num_embeddings, dim});
}

Tensor Embedding::forward(const Tensor& ids) const {
  return ops::embedding(ids, param("weight"));
}

DepthwiseConv2d::DepthwiseConv2d(int64_t channels, int64_t kernel_h, int64_t kernel_w,
                                 int64_t stride_h, int64_t stride_w, int64_t padding_h,
                                 int64_t padding_w, bool bias)
    : Module("DepthwiseConv2d"),
      channels_(channels),
      options_{stride_h, stride_w, padding_h, padding_w},
      has_bias_(bias) {
  register_parameter("weight", {channels, 1, kernel_h, kernel_w});
  if (bias) register_parameter("bias", {channels});
}

Tensor DepthwiseConv2d::forward(const Tensor& x) const {
  return ops::depthwise_conv2d(x, param("weight"), has_bias_ ? param("bias") : Tensor(), options_);
}

}  // namespace oasr::layers
