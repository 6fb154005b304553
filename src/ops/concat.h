// Concatenation along one dimension: tensor plumbing the blocks of every
// architecture need between layer calls (KV caches grown by new frames,
// per-chunk outputs joined). Any dtype, any device: it only copies.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace oasr::ops {

// The parts (one dtype and device, equal sizes outside `dim`) joined along
// `dim` into a new contiguous tensor on that device. Parts of length zero
// along `dim` are allowed; a mismatch is refused naming both tensors.
Tensor concat(const std::vector<Tensor>& parts, int64_t dim);

}  // namespace oasr::ops
