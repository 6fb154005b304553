// CUDA bodies of ops/step_tokens.h.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void positions_after(const Tensor& past_tokens, const Tensor& ids);
// x contiguous [R, n, H, D]; store as ops::write_tokens_at checked it.
void write_tokens_at(const Tensor& x, const Tensor& store, const Tensor& past_tokens);

}  // namespace oasr::ops::cuda
