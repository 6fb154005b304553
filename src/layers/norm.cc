#include "layers/norm.h"

#include <cmath>

#include "ops/elementwise.h"
#include "quant/methods/fused_producers.h"

namespace oasr::layers {

LayerNorm::LayerNorm(int64_t dim, float eps, bool affine)
    : Module("LayerNorm"), dim_(dim), eps_(eps), affine_(affine) {
  if (affine) {
    register_parameter("weight", {dim});
    register_parameter("bias", {dim});
  }
}

RmsNorm::RmsNorm(int64_t dim, float eps) : Module("RmsNorm"), dim_(dim), eps_(eps) {
  register_parameter("weight", {dim});
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

GemmInput LayerNorm::quantized_output(quant::QuantizedActivation activation,
                                      const Tensor& like) const {
  return GemmInput(std::move(activation), like.shape(), like.dtype(), GemmInput::Target::kPerToken);
}

GemmInput LayerNorm::forward_to_gemm(const Tensor& x) const {
  if (!output_quant_) return forward(x);
  return quantized_output(quant::layer_norm_quant(x, weight(), bias(), eps_, *output_quant_), x);
}

LayerNorm::AddResult LayerNorm::add_forward_to_gemm(const Tensor& x, const Tensor& residual) const {
  // alpha = 1 is residual + x bit for bit (1 * x is exact), as in ops::add_layer_norm.
  return add_scaled_forward_to_gemm(x, residual, 1.0f);
}

LayerNorm::AddResult LayerNorm::add_scaled_forward_to_gemm(const Tensor& x, const Tensor& residual,
                                                           float alpha) const {
  if (!output_quant_) {
    ops::AddLayerNormResult r =
        alpha == 1.0f ? add_forward(x, residual) : add_scaled_forward(x, residual, alpha);
    return {std::move(r.sum), GemmInput(std::move(r.normalized))};
  }
  quant::AddLayerNormQuantResult r = quant::add_layer_norm_residual_quant(
      x, residual, alpha, weight(), bias(), eps_, *output_quant_);
  GemmInput normalized = quantized_output(std::move(r.quantized), x);
  return {std::move(r.sum), std::move(normalized)};
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

namespace {
constexpr const char* kFoldedParams[] = {"weight", "bias", "running_mean", "running_var"};
}  // namespace

bool BatchNorm1d::matches(const Folded& folded, const Tensor& x) const {
  if (folded.dtype != x.dtype() || folded.device != x.device()) return false;
  for (size_t i = 0; i < folded.sources.size(); ++i) {
    const Tensor& now = param(kFoldedParams[i]);
    const Tensor& then = folded.sources[i];
    if (now.storage() != then.storage() || now.byte_offset() != then.byte_offset() ||
        now.dtype() != then.dtype()) {
      return false;
    }
  }
  return true;
}

BatchNorm1d::Folded BatchNorm1d::fold(DType dtype, Device device) const {
  // Fold the statistics into one scale and shift per channel (fp32, as
  // PyTorch's inference kernel does), on the host.
  const auto host_f32 = [&](const char* name) {
    return param(name).to(Device::cpu()).to(DType::kF32).contiguous();
  };
  const Tensor w = host_f32("weight");
  const Tensor b = host_f32("bias");
  const Tensor mean = host_f32("running_mean");
  const Tensor var = host_f32("running_var");
  Tensor scale = Tensor::empty({channels_}, DType::kF32);
  Tensor shift = Tensor::empty({channels_}, DType::kF32);
  for (int64_t c = 0; c < channels_; ++c) {
    const float inv_std = 1.0f / std::sqrt(var.data<float>()[c] + eps_);
    scale.data<float>()[c] = w.data<float>()[c] * inv_std;
    shift.data<float>()[c] = b.data<float>()[c] - mean.data<float>()[c] * scale.data<float>()[c];
  }
  Folded folded;
  for (const char* name : kFoldedParams) folded.sources.push_back(param(name));
  folded.dtype = dtype;
  folded.device = device;
  folded.scale = scale.to(dtype).to(device);
  folded.shift = shift.to(dtype).to(device);
  return folded;
}

Tensor BatchNorm1d::forward(const Tensor& x) const {
  Tensor scale;
  Tensor shift;
  {
    std::lock_guard<std::mutex> lock(fold_mutex_);
    if (!folded_ || !matches(*folded_, x)) {
      folded_ = fold(x.dtype(), x.device());
    }
    scale = folded_->scale;
    shift = folded_->shift;
  }
  return ops::add(ops::mul(x, scale), shift);
}

}  // namespace oasr::layers
