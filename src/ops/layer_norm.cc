#include "ops/layer_norm.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/layer_norm.h"
#include "ops/cuda/layer_norm.h"
#include "ops/front_checks.h"

namespace oasr::ops {
namespace {

using detail::check_float;
using detail::NamedTensor;

const float* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

AddLayerNormResult fused_add_norm(const char* op, const Tensor& x, const Tensor& residual,
                                  float alpha, const Tensor& weight, const Tensor& bias,
                                  float eps) {
  detail::check_defined(op, "x", x);
  detail::check_defined(op, "residual", residual);
  const Device device = detail::serving_device(
      op, {{"x", x}, {"residual", residual}, {"weight", weight}, {"bias", bias}});
  const int64_t features = detail::check_norm_args(op, x, weight, bias, device);
  check_float(op, "residual", residual, device);
  OASR_CHECK(residual.shape() == x.shape(), kInvalidArgument, op, ": residual ",
             shape_str(residual.shape()), " and x ", shape_str(x.shape()),
             " must have the same shape");
  detail::check_same_dtype(op,
                           {{"x", x}, {"residual", residual}, {"weight", weight}, {"bias", bias}});

  const Tensor x_c = x.contiguous();
  const Tensor residual_c = residual.contiguous();
  const Tensor weight_c = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  AddLayerNormResult result{Tensor::empty(x.shape(), x.dtype(), device),
                            Tensor::empty(x.shape(), x.dtype(), device)};
  on_device(
      op, device,
      [&] {
        const int64_t rows = detail::span_numel(x.shape(), 0, x.dim() - 1);
        cpu::add_scaled_layer_norm_f32(x_c.data<float>(), residual_c.data<float>(), alpha,
                                       data_or_null(weight_c), data_or_null(bias_c),
                                       result.sum.data<float>(), result.normalized.data<float>(),
                                       rows, features, eps);
      },
      [&](auto) {
        cuda::add_scaled_layer_norm(x_c, residual_c, alpha, weight_c, bias_c, eps, result.sum,
                                    result.normalized);
      });
  return result;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  constexpr const char* kOp = "layer_norm";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  const int64_t features = detail::check_norm_args(kOp, x, weight, bias, device);
  detail::check_same_dtype(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});

  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device,
      [&] {
        const int64_t rows = detail::span_numel(x.shape(), 0, x.dim() - 1);
        cpu::layer_norm_f32(x_c.data<float>(), data_or_null(weight_c), data_or_null(bias_c),
                            out.data<float>(), rows, features, eps);
      },
      [&](auto) { cuda::layer_norm(x_c, weight_c, bias_c, eps, out); });
  return out;
}

AddLayerNormResult add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                  const Tensor& bias, float eps) {
  // 1 * x is exact, so the scaled body with alpha = 1 is residual + x bit for bit.
  return fused_add_norm("add_layer_norm", x, residual, 1.0f, weight, bias, eps);
}

AddLayerNormResult add_scaled_layer_norm(const Tensor& x, const Tensor& residual, float alpha,
                                         const Tensor& weight, const Tensor& bias, float eps) {
  return fused_add_norm("add_scaled_layer_norm", x, residual, alpha, weight, bias, eps);
}

}  // namespace oasr::ops
