#include "ops/rms_norm.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/rms_norm.h"
#include "ops/cuda/rms_norm.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  constexpr const char* kOp = "rms_norm";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"weight", weight}});
  const int64_t features = detail::check_norm_args(kOp, x, weight, Tensor(), device);
  detail::check_same_dtype(kOp, {{"x", x}, {"weight", weight}});
  OASR_CHECK(eps >= 0.0f, kInvalidArgument, kOp, ": eps must be >= 0, got ", eps);

  const Tensor x_c = x.contiguous();
  const Tensor weight_c = weight.defined() ? weight.contiguous() : Tensor();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device,
      [&] {
        const int64_t rows = detail::span_numel(x.shape(), 0, x.dim() - 1);
        cpu::rms_norm_f32(x_c.data<float>(), weight_c.defined() ? weight_c.data<float>() : nullptr,
                          out.data<float>(), rows, features, eps);
      },
      [&](auto) { cuda::rms_norm(x_c, weight_c, eps, out); });
  return out;
}

}  // namespace oasr::ops
