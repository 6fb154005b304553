#include "ops/gemm.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "core/float_types.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/linear_row_dot.h"
#include "ops/cuda/gemm.h"
#include "ops/front_checks.h"

namespace oasr::ops {

using detail::check_defined;
using detail::check_float;
using detail::check_same_dtype;
using detail::serving_device;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
              LinearAlgorithm algorithm) {
  constexpr const char* kOp = "linear";
  check_defined(kOp, "x", x);
  check_defined(kOp, "weight", weight);
  const Device device = serving_device(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  check_float(kOp, "x", x, device);
  check_float(kOp, "weight", weight, device);
  detail::check_rank(kOp, "weight", weight, 2);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, kOp, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t out_features = weight.size(0);
  const int64_t in_features = weight.size(1);
  OASR_CHECK(x.size(-1) == in_features, kInvalidArgument, kOp, ": x ", shape_str(x.shape()),
             " has ", x.size(-1), " input features but weight ", shape_str(weight.shape()),
             " ([out_features, in_features]) expects ", in_features);
  if (bias.defined()) {
    check_float(kOp, "bias", bias, device);
    OASR_CHECK(bias.dim() == 1 && bias.size(0) == out_features, kInvalidArgument, kOp,
               ": bias must be [", out_features, "] to match weight ", shape_str(weight.shape()),
               ", got ", shape_str(bias.shape()));
  }

  check_same_dtype(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});

  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::empty(out_shape, x.dtype(), device);
  const int64_t rows = detail::span_numel(x.shape(), 0, x.dim() - 1);
  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.contiguous();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  on_device(
      kOp, device,
      [&] {
        const float* bias_f32 = bias_c.defined() ? bias_c.data<float>() : nullptr;
        if (algorithm == LinearAlgorithm::kRowDot) {
          cpu::linear_row_dot_f32(x_c.data<float>(), weight_c.data<float>(), bias_f32,
                                  out.data<float>(), rows, out_features, in_features);
        } else {
          cpu::linear_f32(x_c.data<float>(), weight_c.data<float>(), bias_f32, out.data<float>(),
                          rows, out_features, in_features);
        }
      },
      [&](auto on) {
        cuda::linear(x_c.raw_data(), weight_c.raw_data(),
                     bias_c.defined() ? bias_c.raw_data() : nullptr, out.raw_data(), x.dtype(),
                     on.device_index, rows, out_features, in_features);
      });
  return out;
}

Tensor prepare_row_dot_weight(const Tensor& weight) {
  constexpr const char* kOp = "prepare_row_dot_weight";
  check_defined(kOp, "weight", weight);
  detail::check_rank(kOp, "weight", weight, 2);
  OASR_CHECK(weight.device().is_cpu() && weight.dtype() == DType::kF32, kInvalidArgument, kOp,
             ": the row-dot linear runs on CPU float32 weights, got ", weight.str());
  const Tensor w = weight.contiguous();
  const float* values = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    if (float_bits(f16_bits_to_f32(f32_to_f16_bits(values[i]))) != float_bits(values[i])) {
      return w;
    }
  }
  Tensor half = Tensor::empty(w.shape(), DType::kF16);
  auto* bits = static_cast<uint16_t*>(half.raw_data());
  for (int64_t i = 0; i < w.numel(); ++i) bits[i] = f32_to_f16_bits(values[i]);
  return half;
}

Tensor linear_row_dot(const Tensor& x, const Tensor& prepared_weight, const Tensor& bias) {
  constexpr const char* kOp = "linear_row_dot";
  check_defined(kOp, "x", x);
  check_defined(kOp, "weight", prepared_weight);
  detail::check_rank(kOp, "weight", prepared_weight, 2);
  OASR_CHECK(x.device().is_cpu() && x.dtype() == DType::kF32 && prepared_weight.device().is_cpu() &&
                 (prepared_weight.dtype() == DType::kF32 || prepared_weight.dtype() == DType::kF16),
             kInvalidArgument, kOp,
             ": x must be CPU float32 and the weight CPU float32/float16, got ", x.str(), " and ",
             prepared_weight.str());
  const int64_t out_features = prepared_weight.size(0);
  const int64_t in_features = prepared_weight.size(1);
  OASR_CHECK(x.dim() >= 1 && x.size(-1) == in_features, kInvalidArgument, kOp, ": x ",
             shape_str(x.shape()), " does not end in the weight's ", in_features,
             " input features");
  if (bias.defined()) {
    OASR_CHECK(bias.device().is_cpu() && bias.dtype() == DType::kF32 && bias.dim() == 1 &&
                   bias.size(0) == out_features,
               kInvalidArgument, kOp, ": bias must be CPU float32 [", out_features, "], got ",
               bias.str());
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::empty(out_shape, DType::kF32);
  const int64_t rows = detail::span_numel(x.shape(), 0, x.dim() - 1);
  const Tensor x_c = x.contiguous();
  const Tensor w_c = prepared_weight.contiguous();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  const float* bias_data = bias_c.defined() ? bias_c.data<float>() : nullptr;
  if (w_c.dtype() == DType::kF16) {
    cpu::linear_row_dot_f16w(x_c.data<float>(), static_cast<const uint16_t*>(w_c.raw_data()),
                             bias_data, out.data<float>(), rows, out_features, in_features);
  } else {
    cpu::linear_row_dot_f32(x_c.data<float>(), w_c.data<float>(), bias_data, out.data<float>(),
                            rows, out_features, in_features);
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b) {
  constexpr const char* kOp = "matmul";
  check_defined(kOp, "a", a);
  check_defined(kOp, "b", b);
  const Device device = serving_device(kOp, {{"a", a}, {"b", b}});
  check_float(kOp, "a", a, device);
  check_float(kOp, "b", b, device);
  check_same_dtype(kOp, {{"a", a}, {"b", b}});
  OASR_CHECK(a.dim() >= 2 && a.dim() == b.dim(), kInvalidArgument, kOp,
             ": a and b must have the same rank (2 or more), got a ", shape_str(a.shape()),
             " and b ", shape_str(b.shape()));
  const int64_t rank = a.dim();
  for (int64_t d = 0; d < rank - 2; ++d) {
    OASR_CHECK(a.size(d) == b.size(d), kInvalidArgument, kOp,
               ": batch dimensions differ between a ", shape_str(a.shape()), " and b ",
               shape_str(b.shape()), " (nothing is broadcast)");
  }
  const int64_t m = a.size(-2);
  const int64_t k = a.size(-1);
  const int64_t b_k = transpose_b ? b.size(-1) : b.size(-2);
  const int64_t n = transpose_b ? b.size(-2) : b.size(-1);
  OASR_CHECK(b_k == k, kInvalidArgument, kOp, ": inner dimensions differ: a ", shape_str(a.shape()),
             " has K=", k, " but b ", shape_str(b.shape()),
             (transpose_b ? " (transposed, [..., N, K])" : " ([..., K, N])"), " has K=", b_k);

  Shape out_shape = a.shape();
  out_shape[rank - 1] = n;
  Tensor out = Tensor::empty(out_shape, a.dtype(), device);
  const int64_t batch = detail::span_numel(a.shape(), 0, rank - 2);
  const Tensor a_c = a.contiguous();
  const Tensor b_c = b.contiguous();
  on_device(
      kOp, device,
      [&] {
        cpu::matmul_f32(a_c.data<float>(), b_c.data<float>(), out.data<float>(), batch, m, n, k,
                        transpose_b);
      },
      [&](auto on) {
        cuda::matmul(a_c.raw_data(), b_c.raw_data(), out.raw_data(), a.dtype(), on.device_index,
                     batch, m, n, k, transpose_b);
      });
  return out;
}

}  // namespace oasr::ops
