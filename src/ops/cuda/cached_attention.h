// CUDA body of ops/cached_attention.h. One block of 128 threads per (head,
// query step, query row): each thread scores keys t, t + 128, ... (one
// sequential fma chain over the 64 dims from 16-byte loads of the key row,
// e4m3 codes dequantized in registers), the scores stay in shared memory,
// warp 0 sums the exponentials in the definition's 32 partials and
// butterfly, and 8 groups of 16 threads accumulate the weighted values of
// keys j = g mod 8, 4 adjacent columns a thread (one load per key).
// Every step of the definition's order is kept, so the bits equal the CPU
// body's.
#pragma once

#include "core/tensor.h"
#include "ops/cached_attention.h"

namespace oasr::ops::cuda {

// `in` passed ops::cached_attention_fusable; out is contiguous [R, n, H * 64].
void cached_attention(const CachedAttentionInputs& in, const Tensor& out);

}  // namespace oasr::ops::cuda
