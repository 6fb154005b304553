// CUDA body of ops/write_slots.h.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

// As ops::write_slots checked them.
void write_slots(const Tensor& x, const Tensor& store, const Tensor& slots);

}  // namespace oasr::ops::cuda
