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

// The same gather for int64 ids on a device whose range the caller has
// established (token ids checked on the host before they moved, positions
// computed in range): the ids are not copied back for the check, so a
// recorded device graph can hold the gather (ops/step_tokens.h). The device
// body clamps an id outside [0, V) into it rather than read outside the
// table. On the CPU it is embedding().
Tensor embedding_device_ids(const Tensor& ids, const Tensor& table);

}  // namespace oasr::ops
