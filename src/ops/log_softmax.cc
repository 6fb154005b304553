#include "ops/log_softmax.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/log_softmax.h"
#include "ops/cuda/log_softmax.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor log_softmax(const Tensor& x, int64_t dim) {
  constexpr const char* kOp = "log_softmax";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}});
  detail::check_float(kOp, "x", x, device);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, kOp, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t axis = detail::wrap_dim(kOp, dim, x.dim());
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  const int64_t outer = detail::span_numel(x.shape(), 0, axis);
  const int64_t inner = detail::span_numel(x.shape(), axis + 1, x.dim());
  on_device(
      kOp, device,
      [&] {
        cpu::log_softmax_f32(x_c.data<float>(), out.data<float>(), outer, x.size(axis), inner);
      },
      [&](auto) { cuda::log_softmax(x_c, out, outer, x.size(axis), inner); });
  return out;
}

}  // namespace oasr::ops
