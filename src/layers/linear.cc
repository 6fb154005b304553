#include "layers/linear.h"

#include "core/error.h"
#include "ops/activation.h"
#include "ops/gemm.h"

namespace oasr::layers {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Linear(in_features, out_features, bias, "Linear", {out_features, in_features}) {}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, std::string type_name,
               Shape weight_shape)
    : Module(std::move(type_name)),
      in_features_(in_features),
      out_features_(out_features),
      has_bias_(bias) {
  register_parameter("weight", std::move(weight_shape));
  if (bias) register_parameter("bias", {out_features});
}

quant::GemmGeometry Linear::quant_geometry() const {
  quant::GemmGeometry g;
  g.kind = quant::LayerKind::kLinear;
  g.in_features = in_features_;
  g.out_features = out_features_;
  g.quantized_weight_shape = {out_features_, in_features_};
  return g;
}

Tensor Linear::forward(const Tensor& x) const {
  observe_input(x);
  if (quantized()) return quant_forward(x, gemm_activation());
  Tensor y = full_precision_forward(x);
  if (gemm_activation() != Activation::kNone) ops::activation_inplace(y, gemm_activation());
  return y;
}

Tensor Linear::forward(const GemmInput& x) const {
  if (!x.is_quantized()) return forward(x.tensor());
  observe_input(x);  // refuses: an observer needs the full-precision input
  OASR_CHECK(quantized(), kInternal, path(),
             ": a full-precision layer got a fused producer's 8-bit input; link_quantization "
             "arms links into quantized layers only");
  return quant_forward(x, gemm_activation());
}

GemmInput Linear::chain_forward(const GemmInput& x) const {
  if (output_quant_consumer() == nullptr) return forward(x);
  if (!x.is_quantized()) observe_input(x.tensor());
  return quant_forward_to_consumer(x, gemm_activation());
}

Tensor Linear::full_precision_forward(const Tensor& x) const {
  const Tensor bias = has_bias_ ? param("bias") : Tensor();
  if (cpu_algorithm_ == ops::LinearAlgorithm::kRowDot && x.device().is_cpu() &&
      x.dtype() == DType::kF32) {
    return ops::linear_row_dot(x, row_dot_weight(), bias);
  }
  return ops::linear(x, weight_matrix(), bias, cpu_algorithm_);
}

Tensor Linear::row_dot_weight() const {
  const Tensor weight = weight_matrix();
  std::lock_guard<std::mutex> lock(row_dot_mutex_);
  if (!row_dot_weight_.defined() || !row_dot_source_.defined() ||
      row_dot_source_.raw_data() != weight.raw_data() ||
      row_dot_source_.shape() != weight.shape()) {
    row_dot_weight_ = ops::prepare_row_dot_weight(weight);
    row_dot_source_ = weight;
  }
  return row_dot_weight_;
}

LinearActivation::LinearActivation(int64_t in_features, int64_t out_features, Activation activation,
                                   bool bias)
    : Linear(in_features, out_features, bias, "LinearActivation", {out_features, in_features}),
      activation_(activation) {}

PointwiseConv1d::PointwiseConv1d(int64_t in_channels, int64_t out_channels, bool bias)
    : Linear(in_channels, out_channels, bias, "PointwiseConv1d", {out_channels, in_channels, 1}) {}

quant::GemmGeometry PointwiseConv1d::quant_geometry() const {
  quant::GemmGeometry g = Linear::quant_geometry();
  g.kind = quant::LayerKind::kPointwiseConv;
  g.quantized_weight_shape = {out_features(), in_features(), 1};
  return g;
}

Tensor PointwiseConv1d::weight_matrix() const {
  return param("weight").view({out_features(), in_features()});
}

}  // namespace oasr::layers
