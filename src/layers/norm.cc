#include "layers/norm.h"

#include <cmath>

#include "ops/elementwise.h"

namespace oasr::layers {

LayerNorm::LayerNorm(int64_t dim, float eps, bool affine)
    : Module("LayerNorm"), dim_(dim), eps_(eps), affine_(affine) {
  if (affine) {
    register_parameter("weight", {dim});
    register_parameter("bias", {dim});
  }
}

Tensor LayerNorm::weight() const {
  return affine_ ? param("weight") : Tensor();
}
Tensor LayerNorm::bias() const {
  return affine_ ? param("bias") : Tensor();
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return ops::layer_norm(x, weight(), bias(), eps_);
}

ops::AddLayerNormResult LayerNorm::add_forward(const Tensor& x, const Tensor& residual) const {
  return ops::add_layer_norm(x, residual, weight(), bias(), eps_);
}

ops::AddLayerNormResult LayerNorm::add_scaled_forward(const Tensor& x, const Tensor& residual,
                                                      float alpha) const {
  return ops::add_scaled_layer_norm(x, residual, alpha, weight(), bias(), eps_);
}

BatchNorm1d::BatchNorm1d(int64_t channels, float eps)
    : Module("BatchNorm1d"), channels_(channels), eps_(eps) {
  register_parameter("weight", {channels});
  register_parameter("bias", {channels});
  register_parameter("running_mean", {channels});
  register_parameter("running_var", {channels});
  register_parameter("num_batches_tracked", {}, DType::kI64, DTypePolicy::kExact,
                     /*required=*/false);
}

Tensor BatchNorm1d::forward(const Tensor& x) const {
  // Fold the statistics into one scale and shift per channel (fp32, as
  // PyTorch's inference kernel does), then x * scale + shift.
  const Tensor w = param("weight").to(DType::kF32);
  const Tensor b = param("bias").to(DType::kF32);
  const Tensor mean = param("running_mean").to(DType::kF32);
  const Tensor var = param("running_var").to(DType::kF32);
  Tensor scale = Tensor::empty({channels_}, DType::kF32);
  Tensor shift = Tensor::empty({channels_}, DType::kF32);
  for (int64_t c = 0; c < channels_; ++c) {
    const float inv_std = 1.0f / std::sqrt(var.data<float>()[c] + eps_);
    scale.data<float>()[c] = w.data<float>()[c] * inv_std;
    shift.data<float>()[c] = b.data<float>()[c] - mean.data<float>()[c] * scale.data<float>()[c];
  }
  return ops::add(ops::mul(x, scale), shift);
}

}  // namespace oasr::layers
