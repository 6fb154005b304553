// The size check every checkpoint reader makes of a shape it read from a
// file (internal to io/), before it trusts the shape enough to allocate or
// to hand it to Tensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "core/tensor.h"

namespace oasr::io::detail {

// The bytes a tensor of `shape` with elements of `element_size` bytes
// holds, or nullopt when it cannot exist: a negative dimension, or a size
// that int64 cannot hold. Zero-size dimensions do not help: Tensor's
// contiguous strides multiply the other dimensions anyway (a [0, 2^40,
// 2^40] tensor has a stride of 2^80), so they are counted as 1 here.
inline std::optional<uint64_t> tensor_nbytes(const Shape& shape, size_t element_size) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t span = element_size;  // the product with zero dimensions as 1
  uint64_t bytes = element_size;
  for (const int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto extent = static_cast<uint64_t>(std::max<int64_t>(d, 1));
    if (__builtin_mul_overflow(span, extent, &span) || span > kMax) return std::nullopt;
    bytes *= static_cast<uint64_t>(d);  // <= span
  }
  return bytes;
}

}  // namespace oasr::io::detail
