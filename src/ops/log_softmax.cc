#include "ops/log_softmax.h"

#include "core/error.h"
#include "ops/cpu/log_softmax.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor log_softmax(const Tensor& x, int64_t dim) {
  constexpr const char* kOp = "log_softmax";
  detail::check_defined(kOp, "x", x);
  detail::select_device(kOp, {{"x", x}});
  detail::check_float32(kOp, "x", x);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, kOp, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t axis = detail::wrap_dim(kOp, dim, x.dim());
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::kF32);
  cpu::log_softmax_f32(x_c.data<float>(), out.data<float>(), detail::span_numel(x.shape(), 0, axis),
                       x.size(axis), detail::span_numel(x.shape(), axis + 1, x.dim()));
  return out;
}

}  // namespace oasr::ops
