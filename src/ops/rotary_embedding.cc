#include "ops/rotary_embedding.h"

#include <cmath>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/rotary_embedding.h"
#include "ops/cuda/rotary_embedding.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  constexpr const char* kOp = "rotary_embedding";
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "positions", positions);
  detail::check_defined(kOp, "inv_freq", inv_freq);
  const Device device =
      detail::serving_device(kOp, {{"x", x}, {"positions", positions}, {"inv_freq", inv_freq}});
  detail::check_float(kOp, "x", x, device);
  OASR_CHECK(x.dim() == 4, kInvalidArgument, kOp, ": x must be [B, T, heads, head_dim], got ",
             shape_str(x.shape()));
  const int64_t head_dim = x.size(3);
  OASR_CHECK(head_dim % 2 == 0, kInvalidArgument, kOp,
             ": head_dim must be even (pairs i, i + head_dim / 2 rotate together), got ", head_dim);
  OASR_CHECK(positions.dtype() == DType::kI64 && positions.dim() == 2 &&
                 positions.size(0) == x.size(0) && positions.size(1) == x.size(1),
             kInvalidArgument, kOp, ": positions must be int64 [", x.size(0), ", ", x.size(1),
             "] (one per row of x ", shape_str(x.shape()), "), got ", dtype_name(positions.dtype()),
             " ", shape_str(positions.shape()));
  OASR_CHECK(
      inv_freq.dtype() == DType::kF32 && inv_freq.dim() == 1 && inv_freq.size(0) == head_dim / 2,
      kInvalidArgument, kOp, ": inv_freq must be float32 [", head_dim / 2, "], got ",
      dtype_name(inv_freq.dtype()), " ", shape_str(inv_freq.shape()));

  const Tensor x_c = x.contiguous();
  const Tensor positions_c = positions.contiguous();
  const Tensor inv_freq_c = inv_freq.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device,
      [&] {
        cpu::rotary_embedding_f32(x_c.data<float>(), positions_c.data<int64_t>(),
                                  inv_freq_c.data<float>(), out.data<float>(),
                                  x.size(0) * x.size(1), x.size(2), head_dim);
      },
      [&](auto) { cuda::rotary_embedding(x_c, positions_c, inv_freq_c, out); });
  return out;
}

Tensor rotary_inv_freq(int64_t head_dim, float theta) {
  OASR_CHECK(head_dim > 0 && head_dim % 2 == 0, kInvalidArgument,
             "rotary_inv_freq: head_dim must be even and positive, got ", head_dim);
  OASR_CHECK(theta > 0.0f && std::isfinite(theta), kInvalidArgument,
             "rotary_inv_freq: rope_theta must be a positive number, got ", theta);
  Tensor out = Tensor::empty({head_dim / 2}, DType::kF32, Device::cpu());
  float* p = out.data<float>();
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    p[i] = 1.0f / std::pow(theta, exponent);
  }
  return out;
}

}  // namespace oasr::ops
