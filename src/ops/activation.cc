#include "ops/activation.h"

#include "core/error.h"
#include "ops/cpu/activation.h"
#include "ops/front_checks.h"

namespace oasr::ops {

namespace {

void check_activation_input(const char* op, const Tensor& x) {
  detail::check_defined(op, "x", x);
  detail::select_device(op, {{"x", x}});
  detail::check_float32(op, "x", x);
}

}  // namespace

Tensor activation(const Tensor& x, Activation activation) {
  constexpr const char* kOp = "activation";
  check_activation_input(kOp, x);
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::kF32);
  cpu::activation_f32(x_c.data<float>(), out.data<float>(), x.numel(), activation);
  return out;
}

void activation_inplace(const Tensor& x, Activation activation) {
  constexpr const char* kOp = "activation_inplace";
  check_activation_input(kOp, x);
  OASR_CHECK(x.is_contiguous(), kInvalidArgument, kOp, ": x ", x.str(),
             " is not contiguous; use activation() for views");
  cpu::activation_f32(x.data<float>(), x.data<float>(), x.numel(), activation);
}

}  // namespace oasr::ops
