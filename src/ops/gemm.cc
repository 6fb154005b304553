#include "ops/gemm.h"

#include "core/error.h"
#include "ops/cpu/gemm.h"
#include "ops/front_checks.h"

namespace oasr::ops {

using detail::check_defined;
using detail::check_float32;
using detail::select_device;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  constexpr const char* kOp = "linear";
  check_defined(kOp, "x", x);
  check_defined(kOp, "weight", weight);
  select_device(kOp, {{"x", x}, {"weight", weight}, {"bias", bias}});
  check_float32(kOp, "x", x);
  check_float32(kOp, "weight", weight);
  detail::check_rank(kOp, "weight", weight, 2);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, kOp, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t out_features = weight.size(0);
  const int64_t in_features = weight.size(1);
  OASR_CHECK(x.size(-1) == in_features, kInvalidArgument, kOp, ": x ", shape_str(x.shape()),
             " has ", x.size(-1), " input features but weight ", shape_str(weight.shape()),
             " ([out_features, in_features]) expects ", in_features);
  if (bias.defined()) {
    check_float32(kOp, "bias", bias);
    OASR_CHECK(bias.dim() == 1 && bias.size(0) == out_features, kInvalidArgument, kOp,
               ": bias must be [", out_features, "] to match weight ", shape_str(weight.shape()),
               ", got ", shape_str(bias.shape()));
  }

  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::empty(out_shape, DType::kF32);
  const int64_t rows = detail::span_numel(x.shape(), 0, x.dim() - 1);
  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.contiguous();
  const Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  cpu::linear_f32(x_c.data<float>(), weight_c.data<float>(),
                  bias_c.defined() ? bias_c.data<float>() : nullptr, out.data<float>(), rows,
                  out_features, in_features);
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b) {
  constexpr const char* kOp = "matmul";
  check_defined(kOp, "a", a);
  check_defined(kOp, "b", b);
  select_device(kOp, {{"a", a}, {"b", b}});
  check_float32(kOp, "a", a);
  check_float32(kOp, "b", b);
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
  Tensor out = Tensor::empty(out_shape, DType::kF32);
  const int64_t batch = detail::span_numel(a.shape(), 0, rank - 2);
  const Tensor a_c = a.contiguous();
  const Tensor b_c = b.contiguous();
  cpu::matmul_f32(a_c.data<float>(), b_c.data<float>(), out.data<float>(), batch, m, n, k,
                  transpose_b);
  return out;
}

}  // namespace oasr::ops
