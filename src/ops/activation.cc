#include "ops/activation.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/activation.h"
#include "ops/cuda/activation.h"
#include "ops/front_checks.h"

namespace oasr::ops {

namespace {

// Returns the device the op runs on.
Device check_activation_input(const char* op, const Tensor& x) {
  detail::check_defined(op, "x", x);
  const Device device = detail::serving_device(op, {{"x", x}});
  detail::check_float(op, "x", x, device);
  return device;
}

}  // namespace

Tensor activation(const Tensor& x, Activation activation) {
  constexpr const char* kOp = "activation";
  const Device device = check_activation_input(kOp, x);
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device,
      [&] { cpu::activation_f32(x_c.data<float>(), out.data<float>(), x.numel(), activation); },
      [&](auto) { cuda::activation(x_c, out, activation); });
  return out;
}

void activation_inplace(const Tensor& x, Activation activation) {
  constexpr const char* kOp = "activation_inplace";
  const Device device = check_activation_input(kOp, x);
  OASR_CHECK(x.is_contiguous(), kInvalidArgument, kOp, ": x ", x.str(),
             " is not contiguous; use activation() for views");
  on_device(
      kOp, device,
      [&] { cpu::activation_f32(x.data<float>(), x.data<float>(), x.numel(), activation); },
      [&](auto) { cuda::activation(x, x, activation); });
}

}  // namespace oasr::ops
