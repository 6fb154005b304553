// Convolution layers (NCHW / NCT, PyTorch weight layouts) and Embedding.
// Conv2d is quantizable (int8, static input scale; weight stored KRSC when
// quantized); DepthwiseConv1d declares itself a conv1d that always declines,
// so a selection by kind records why it stays full precision.
#pragma once

#include "layers/module.h"
#include "layers/quantizable.h"
#include "ops/conv2d.h"
#include "ops/depthwise_conv2d.h"

namespace oasr::layers {

class Conv2d : public Module, public QuantizableLayer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
         int64_t stride_h, int64_t stride_w, bool bias = true, int64_t padding_h = 0,
         int64_t padding_w = 0);
  Tensor forward(const Tensor& x) const;  // [B, Cin, H, W] -> [B, Cout, H', W']
  int64_t out_channels() const { return out_channels_; }
  // Whether forward_nhwc_relu serves x [B, H, W, Cin]: a full-precision layer
  // with no calibration observer, where ops::conv2d_nhwc_served says.
  bool nhwc_served(const Tensor& x) const;
  // relu(conv(x)) channels-last: [B, H, W, Cin] -> [B, H', W', Cout]. Refused
  // where nhwc_served is false.
  Tensor forward_nhwc_relu(const Tensor& x) const;

  quant::GemmGeometry quant_geometry() const override;
  std::string quant_refusal(const quant::QuantScheme& scheme) const override;
  Module& quant_module() override { return *this; }

 protected:
  Tensor fp_weight_matrix() const override;  // [Cout, KH * KW * Cin] (KRSC order)

 private:
  Tensor quantized_forward(const Tensor& x) const;

  int64_t in_channels_;
  int64_t kernel_h_;
  int64_t kernel_w_;
  int64_t out_channels_;
  ops::Conv2dOptions options_;
  bool has_bias_;
};

// Depthwise Conv1d (groups == channels), weight [C, 1, K], with explicit
// (left, right) zero padding so a causal convolution is pad_left = K - 1.
class DepthwiseConv1d : public Module, public QuantizableLayer {
 public:
  DepthwiseConv1d(int64_t channels, int64_t kernel_size, bool bias = true);
  Tensor forward(const Tensor& x, int64_t pad_left, int64_t pad_right) const;  // [B, C, T]
  // GLU then this convolution over channels-last activations:
  // [B, T, 2C] -> [B, T', C] (ops::glu_depthwise_conv1d_channels_last; CUDA).
  Tensor glu_forward_channels_last(const Tensor& x, int64_t pad_left, int64_t pad_right) const;
  int64_t kernel_size() const { return kernel_size_; }

  quant::GemmGeometry quant_geometry() const override;
  std::string quant_refusal(const quant::QuantScheme& scheme) const override;
  Module& quant_module() override { return *this; }

 protected:
  Tensor fp_weight_matrix() const override;

 private:
  int64_t channels_;
  int64_t kernel_size_;
  bool has_bias_;
};

// Depthwise Conv2d (groups == channels), weight [C, 1, KH, KW], symmetric
// zero padding (ops/depthwise_conv2d.h). Full precision only: it serves
// subsampling front ends, which the spec keeps full precision.
class DepthwiseConv2d : public Module {
 public:
  DepthwiseConv2d(int64_t channels, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                  int64_t stride_w, int64_t padding_h, int64_t padding_w, bool bias = true);
  Tensor forward(const Tensor& x) const;  // [B, C, H, W] -> [B, C, H', W']

 private:
  int64_t channels_;
  ops::DepthwiseConv2dOptions options_;
  bool has_bias_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& ids) const;  // [...] int64/int32 -> [..., dim]
};

}  // namespace oasr::layers
