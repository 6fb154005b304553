// CUDA body of ops/top_candidates.h: one block per row; the row's max and
// sum of exponentials by block reductions (float32), then k rounds of a block
// arg-max, each over the tokens ranked after the previous round's winner in
// the order (value descending, token ascending), so the k winners come out
// in that order without sorting. A NaN value ranks as -inf here.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops::cuda {

// x: contiguous [R, V] float32 / float16 / bfloat16; suppressed: uint8 [V] or
// undefined; offsets: float32 [R] or undefined; outputs [R, k] on x's device.
void top_candidates(const Tensor& x, const Tensor& suppressed, const Tensor& offsets, int64_t k,
                    bool by_log_prob, const Tensor& values, const Tensor& tokens,
                    const Tensor& log_probs);

}  // namespace oasr::ops::cuda
