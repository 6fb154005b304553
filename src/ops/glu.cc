#include "ops/glu.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/glu.h"
#include "ops/cuda/glu.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor glu(const Tensor& x, int64_t dim) {
  constexpr const char* kOp = "glu";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}});
  detail::check_float(kOp, "x", x, device);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, kOp, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t axis = detail::wrap_dim(kOp, dim, x.dim());
  const int64_t size = x.size(axis);
  OASR_CHECK(size % 2 == 0, kInvalidArgument, kOp, ": dimension ", dim, " of x ",
             shape_str(x.shape()), " has odd size ", size, "; glu splits it into two halves");

  Shape out_shape = x.shape();
  out_shape[axis] = size / 2;
  Tensor out = Tensor::empty(out_shape, x.dtype(), device);
  const Tensor x_c = x.contiguous();
  const int64_t outer = detail::span_numel(x.shape(), 0, axis);
  const int64_t inner = detail::span_numel(x.shape(), axis + 1, x.dim());
  on_device(
      kOp, device,
      [&] { cpu::glu_f32(x_c.data<float>(), out.data<float>(), outer, size / 2, inner); },
      [&](auto) { cuda::glu(x_c, out, outer, size / 2, inner); });
  return out;
}

}  // namespace oasr::ops
