#include "layers/linear.h"

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

Tensor Linear::forward(const Tensor& x) const {
  return ops::linear(x, weight_matrix(), has_bias_ ? param("bias") : Tensor());
}

LinearActivation::LinearActivation(int64_t in_features, int64_t out_features, Activation activation,
                                   bool bias)
    : Linear(in_features, out_features, bias, "LinearActivation", {out_features, in_features}),
      activation_(activation) {}

Tensor LinearActivation::forward(const Tensor& x) const {
  Tensor y = Linear::forward(x);
  if (activation_ != Activation::kNone) ops::activation_inplace(y, activation_);
  return y;
}

PointwiseConv1d::PointwiseConv1d(int64_t in_channels, int64_t out_channels, bool bias)
    : Linear(in_channels, out_channels, bias, "PointwiseConv1d", {out_channels, in_channels, 1}) {}

Tensor PointwiseConv1d::weight_matrix() const {
  return param("weight").view({out_features(), in_features()});
}

}  // namespace oasr::layers
