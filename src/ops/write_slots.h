// Scattered row writes for a paged store (layers/paged_kv_cache.h): a step's
// new tokens go to the pool slots their sequences' block tables name, in
// one pass instead of one copy per sequence and block.
#pragma once

#include "core/tensor.h"

namespace oasr::ops {

// store[slots[m]] = x[m] for every m: x [M, W] and store [S, W] of one dtype
// (any: the bytes move as they are), each row contiguous; slots int64 [M]
// on their device, distinct, each in [0, S). An exact copy. The CPU body
// refuses a slot outside the store naming it; the CUDA body skips one (the
// cache hands out only its own slots).
void write_slots(const Tensor& x, Tensor store, const Tensor& slots);

}  // namespace oasr::ops
