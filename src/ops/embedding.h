// Embedding lookup (PyTorch F.embedding without padding_idx/max_norm, which
// only matter in training): row ids[i] of the table for every id.
#pragma once

#include "core/tensor.h"

namespace oasr::ops {

// ids int64 or int32, any shape; table [V, D] (float32 on the CPU; float32,
// float16 or bfloat16 on CUDA, ids on the same device) -> ids.shape + [D].
// Every id must lie in [0, V); the first one that does not is refused,
// naming it, its position and V.
Tensor embedding(const Tensor& ids, const Tensor& table);

}  // namespace oasr::ops
