#include "ops/softmax.h"

#include <vector>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/softmax.h"
#include "ops/cuda/softmax.h"
#include "ops/front_checks.h"

namespace oasr::ops {
namespace {

// Per dimension of `target` (x's shape): the element step in the contiguous
// `mask` (PyTorch's broadcasting rule), 0 where the mask is broadcast. A mask
// that does not broadcast to x is refused naming both shapes.
std::vector<int64_t> broadcast_mask_strides(const char* op, const Tensor& mask,
                                            const Shape& target) {
  const int64_t rank = static_cast<int64_t>(target.size());
  const int64_t lead = rank - mask.dim();
  const auto refuse = [&] {
    OASR_THROW(kInvalidArgument, op, ": mask ", shape_str(mask.shape()),
               " cannot be broadcast to x ", shape_str(target),
               " (aligned from the right, each mask dimension must be 1 or equal to x's)");
  };
  if (lead < 0) refuse();
  const Shape mask_strides = contiguous_strides(mask.shape());
  std::vector<int64_t> strides(rank, 0);
  for (int64_t d = 0; d < mask.dim(); ++d) {
    const int64_t size = mask.size(d);
    if (size == target[lead + d]) {
      strides[lead + d] = mask_strides[d];
    } else if (size != 1) {
      refuse();
    }
  }
  return strides;
}

// The contiguous CPU mask `source` expanded to exactly `target`'s shape (the
// CPU body indexes it like x). A mask of x's shape is used as is.
Tensor broadcast_mask(const Tensor& source, const std::vector<int64_t>& source_strides,
                      const Shape& target) {
  const int64_t rank = static_cast<int64_t>(target.size());
  if (source.shape() == target) return source;
  Tensor out = Tensor::empty(target, DType::kU8);
  const int64_t total = out.numel();
  if (total == 0) return out;
  const uint8_t* in = source.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  std::vector<int64_t> index(rank, 0);
  int64_t source_offset = 0;
  for (int64_t i = 0; i < total; ++i) {
    dst[i] = in[source_offset];
    for (int64_t d = rank - 1; d >= 0; --d) {  // odometer step in row-major order
      source_offset += source_strides[d];
      if (++index[d] < target[d]) break;
      source_offset -= source_strides[d] * target[d];
      index[d] = 0;
    }
  }
  return out;
}

Tensor run_softmax(const char* op, const Tensor& x, const Tensor& mask, int64_t dim) {
  detail::check_defined(op, "x", x);
  const Device device = detail::serving_device(op, {{"x", x}, {"mask", mask}});
  detail::check_float(op, "x", x, device);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, op, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t axis = detail::wrap_dim(op, dim, x.dim());

  Tensor mask_c;
  std::vector<int64_t> mask_strides;
  if (mask.defined()) {
    OASR_CHECK(mask.dtype() == DType::kU8, kInvalidArgument, op,
               ": mask must be uint8 (nonzero = keep, 0 = masked), got ", dtype_name(mask.dtype()));
    mask_strides = broadcast_mask_strides(op, mask, x.shape());
    mask_c = mask.contiguous();
  }
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  on_device(
      op, device,
      [&] {
        const Tensor keep =
            mask_c.defined() ? broadcast_mask(mask_c, mask_strides, x.shape()) : Tensor();
        cpu::softmax_f32(x_c.data<float>(), keep.defined() ? keep.data<uint8_t>() : nullptr,
                         out.data<float>(), detail::span_numel(x.shape(), 0, axis), x.size(axis),
                         detail::span_numel(x.shape(), axis + 1, x.dim()));
      },
      [&](auto) { cuda::softmax(x_c, mask_c, mask_strides, axis, out); });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return run_softmax("softmax", x, Tensor(), dim);
}

Tensor masked_softmax(const Tensor& x, const Tensor& mask, int64_t dim) {
  detail::check_defined("masked_softmax", "mask", mask);
  return run_softmax("masked_softmax", x, mask, dim);
}

}  // namespace oasr::ops
