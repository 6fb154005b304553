#include "ops/softmax.h"

#include <vector>

#include "core/error.h"
#include "ops/cpu/softmax.h"
#include "ops/front_checks.h"

namespace oasr::ops {
namespace {

// The mask as a contiguous uint8 tensor of exactly `target`'s shape (the CPU
// body indexes it like x). A mask of x's shape is used as is.
Tensor broadcast_mask(const char* op, const Tensor& mask, const Shape& target) {
  const int64_t rank = static_cast<int64_t>(target.size());
  const int64_t lead = rank - mask.dim();
  const auto refuse = [&] {
    OASR_THROW(kInvalidArgument, op, ": mask ", shape_str(mask.shape()),
               " cannot be broadcast to x ", shape_str(target),
               " (aligned from the right, each mask dimension must be 1 or equal to x's)");
  };
  if (lead < 0) refuse();
  const Tensor source = mask.contiguous();
  if (source.shape() == target) return source;

  // Per target dimension: the step in the source, 0 where the mask is broadcast.
  std::vector<int64_t> source_strides(rank, 0);
  for (int64_t d = 0; d < mask.dim(); ++d) {
    const int64_t size = mask.size(d);
    if (size == target[lead + d]) {
      source_strides[lead + d] = source.strides()[d];
    } else if (size != 1) {
      refuse();
    }
  }
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
  detail::select_device(op, {{"x", x}, {"mask", mask}});
  detail::check_float32(op, "x", x);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, op, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t axis = detail::wrap_dim(op, dim, x.dim());

  Tensor keep;
  if (mask.defined()) {
    OASR_CHECK(mask.dtype() == DType::kU8, kInvalidArgument, op,
               ": mask must be uint8 (nonzero = keep, 0 = masked), got ", dtype_name(mask.dtype()));
    keep = broadcast_mask(op, mask, x.shape());
  }
  const Tensor x_c = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::kF32);
  cpu::softmax_f32(x_c.data<float>(), keep.defined() ? keep.data<uint8_t>() : nullptr,
                   out.data<float>(), detail::span_numel(x.shape(), 0, axis), x.size(axis),
                   detail::span_numel(x.shape(), axis + 1, x.dim()));
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
