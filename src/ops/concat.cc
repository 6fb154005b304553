#include "ops/concat.h"

#include "core/error.h"

namespace oasr::ops {

Tensor concat(const std::vector<Tensor>& parts, int64_t dim) {
  OASR_CHECK(!parts.empty(), kInternal, "concat: no parts");
  const Tensor& first = parts.front();
  const int64_t rank = first.dim();
  const int64_t axis = dim < 0 ? dim + rank : dim;
  OASR_CHECK(axis >= 0 && axis < rank, kInternal, "concat: dimension ", dim, " out of range");
  Shape shape = first.shape();
  int64_t total = 0;
  for (const Tensor& part : parts) {
    Shape expected = shape;
    expected[axis] = part.size(axis);
    OASR_CHECK(part.shape() == expected && part.dtype() == first.dtype() &&
                   part.device() == first.device(),
               kInternal, "concat: part ", part.str(), " does not match ", first.str(),
               " outside dimension ", axis, " (or in dtype or device)");
    total += part.size(axis);
  }
  shape[axis] = total;
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& part : parts) {
    const int64_t length = part.size(axis);
    if (length > 0) out.narrow(axis, at, length).copy_(part);
    at += length;
  }
  return out;
}

}  // namespace oasr::ops
