#include "ops/sequence_mask.h"

#include <algorithm>
#include <vector>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/sequence_mask.h"
#include "ops/cuda/sequence_mask.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor zero_tail_frames(const Tensor& x, std::span<const int64_t> lengths) {
  constexpr const char* kOp = "zero_tail_frames";
  detail::check_defined(kOp, "x", x);
  const Device device = detail::serving_device(kOp, {{"x", x}});
  detail::check_float(kOp, "x", x, device);
  detail::check_rank(kOp, "x", x, 3);
  const int64_t batch = x.size(0);
  const int64_t frames = x.size(1);
  OASR_CHECK(static_cast<int64_t>(lengths.size()) == batch, kInvalidArgument, kOp, ": lengths has ",
             lengths.size(), " entries but x ", shape_str(x.shape()), " has ", batch,
             " rows (B); pass one length per row");

  std::vector<int64_t> valid(lengths.size());
  std::transform(lengths.begin(), lengths.end(), valid.begin(),
                 [frames](int64_t n) { return std::clamp<int64_t>(n, 0, frames); });
  const bool padded =
      std::any_of(valid.begin(), valid.end(), [&](int64_t n) { return n < frames; });
  if (!padded) return x;

  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device,
      [&] {
        cpu::zero_tail_frames_f32(x_c.data<float>(), valid.data(), out.data<float>(), batch, frames,
                                  x.size(2));
      },
      [&](auto) {
        cuda::zero_tail_frames(x_c, Tensor::from_vector(valid, {batch}).to(device), out);
      });
  return out;
}

Tensor zero_tail_frames(const Tensor& x, const Tensor& lengths) {
  constexpr const char* kOp = "zero_tail_frames";
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "lengths", lengths);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"lengths", lengths}});
  detail::check_float(kOp, "x", x, device);
  detail::check_rank(kOp, "x", x, 3);
  const int64_t batch = x.size(0);
  OASR_CHECK(lengths.dtype() == DType::kI64 && lengths.dim() == 1 && lengths.size(0) == batch,
             kInvalidArgument, kOp, ": lengths must be int64 [", batch, "] for x ",
             shape_str(x.shape()), ", got ", dtype_name(lengths.dtype()), " ",
             shape_str(lengths.shape()));
  const Tensor x_c = x.contiguous();
  const Tensor lengths_c = lengths.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      kOp, device,
      [&] {
        const int64_t frames = x.size(1);
        std::vector<int64_t> valid(static_cast<size_t>(batch));
        for (int64_t b = 0; b < batch; ++b) {
          valid[static_cast<size_t>(b)] =
              std::clamp<int64_t>(lengths_c.data<int64_t>()[b], 0, frames);
        }
        cpu::zero_tail_frames_f32(x_c.data<float>(), valid.data(), out.data<float>(), batch, frames,
                                  x.size(2));
      },
      [&](auto) { cuda::zero_tail_frames(x_c, lengths_c, out); });
  return out;
}

}  // namespace oasr::ops
