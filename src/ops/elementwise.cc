#include "ops/elementwise.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/elementwise.h"
#include "ops/cuda/elementwise.h"
#include "ops/front_checks.h"

namespace oasr::ops {
namespace {

struct BinaryArgs {
  Tensor a;         // contiguous
  Tensor b;         // contiguous
  Tensor out;       // a's shape, dtype and device
  int64_t b_numel;  // b repeats every b_numel elements of a
  Device device;
};

BinaryArgs prepare_binary(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_defined(op, "a", a);
  detail::check_defined(op, "b", b);
  const Device device = detail::serving_device(op, {{"a", a}, {"b", b}});
  detail::check_float(op, "a", a, device);
  detail::check_float(op, "b", b, device);
  detail::check_same_dtype(op, {{"a", a}, {"b", b}});

  const Shape& a_shape = a.shape();
  const Shape& b_shape = b.shape();
  size_t first_kept = 0;  // b's leading size-1 dimensions broadcast away
  while (first_kept < b_shape.size() && b_shape[first_kept] == 1) ++first_kept;
  const size_t suffix_rank = b_shape.size() - first_kept;
  bool broadcastable = b_shape.size() <= a_shape.size();
  for (size_t i = 0; broadcastable && i < suffix_rank; ++i) {
    broadcastable = b_shape[b_shape.size() - 1 - i] == a_shape[a_shape.size() - 1 - i];
  }
  OASR_CHECK(broadcastable, kInvalidArgument, op, ": b ", shape_str(b_shape),
             " does not broadcast to a ", shape_str(a_shape),
             " (b must equal a trailing part of a's shape, leading 1s allowed)");
  return {a.contiguous(), b.contiguous(), Tensor::empty(a_shape, a.dtype(), device), b.numel(),
          device};
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  BinaryArgs args = prepare_binary("add", a, b);
  on_device(
      "add", args.device,
      [&] {
        cpu::add_f32(args.a.data<float>(), args.b.data<float>(), args.out.data<float>(),
                     args.a.numel(), args.b_numel);
      },
      [&](auto) { cuda::add(args.a, args.b, args.out); });
  return args.out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  BinaryArgs args = prepare_binary("mul", a, b);
  on_device(
      "mul", args.device,
      [&] {
        cpu::mul_f32(args.a.data<float>(), args.b.data<float>(), args.out.data<float>(),
                     args.a.numel(), args.b_numel);
      },
      [&](auto) { cuda::mul(args.a, args.b, args.out); });
  return args.out;
}

Tensor add_scaled(const Tensor& a, const Tensor& b, float alpha) {
  BinaryArgs args = prepare_binary("add_scaled", a, b);
  on_device(
      "add_scaled", args.device,
      [&] {
        cpu::add_scaled_f32(args.a.data<float>(), args.b.data<float>(), alpha,
                            args.out.data<float>(), args.a.numel(), args.b_numel);
      },
      [&](auto) { cuda::add_scaled(args.a, args.b, alpha, args.out); });
  return args.out;
}

Tensor scale(const Tensor& x, float factor) {
  constexpr const char* kOp = "scale";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}});
  detail::check_float(kOp, "x", x, device);
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device, [&] { cpu::scale_f32(x_c.data<float>(), factor, out.data<float>(), x.numel()); },
      [&](auto) { cuda::scale(x_c, factor, out); });
  return out;
}

}  // namespace oasr::ops
