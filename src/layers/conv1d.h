// Conv1d: a dense 1-d convolution over [B, Cin, T] (PyTorch's nn.Conv1d with
// dilation 1 and groups 1; weight [Cout, Cin, K]), optionally followed by an
// activation that belongs to the layer (Whisper's conv front-end is
// gelu(conv(x))), so a quantized convolution can apply it in its GEMM's
// epilogue. Full precision runs ops::conv2d over a height-1 image.
//
// Quantizable as the conv1d kind (spec "Convolutions and module_types"):
// int8 only, with a calibrated static input scale; the quantized weight is
// stored KSC [Cout, K, Cin] and the forward gathers each output frame's
// receptive field into a row and runs the method's GEMM over the rows.
#pragma once

#include "core/activations.h"
#include "layers/module.h"
#include "layers/quantizable.h"

namespace oasr::layers {

class Conv1d : public Module, public QuantizableLayer {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, bool bias = true, Activation activation = Activation::kNone);

  // x [B, Cin, T] -> [B, Cout, T'] with T' = (T + 2 padding - K) / stride + 1.
  Tensor forward(const Tensor& x) const;

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  int64_t kernel_size() const { return kernel_size_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return padding_; }
  Activation activation() const { return activation_; }
  int64_t output_length(int64_t input_length) const;

  quant::GemmGeometry quant_geometry() const override;
  std::string quant_refusal(const quant::QuantScheme& scheme) const override;
  Module& quant_module() override { return *this; }

 protected:
  Tensor fp_weight_matrix() const override;  // [Cout, K * Cin] (KSC order)

 private:
  void check_input(const Tensor& x) const;
  Tensor quantized_forward(const Tensor& x) const;

  int64_t in_channels_;
  int64_t out_channels_;
  int64_t kernel_size_;
  int64_t stride_;
  int64_t padding_;
  bool has_bias_;
  Activation activation_;
};

}  // namespace oasr::layers
