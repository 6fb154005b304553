// The per-row reduction an autoregressive search needs from a decoder step's
// logits, computed where the logits are, so that only k candidates per row
// cross to the host (decode/whisper_search.h runs it on the GPU instead of
// copying [rows, vocabulary] floats every step).
//
// For row r of logits x [R, V], token j ranks by
//   ByLogProb false: x[r, j]                            (greedy: HF's argmax of the processed
//   logits) ByLogProb true:  log_softmax(x[r])[j] + offsets[r]  (beam search: HF's log_softmax,
//   then the
//                                                         processors, then + the beam's score)
// except that a token with suppressed[j] != 0 ranks -inf (SuppressTokensLogitsProcessor). The
// k best come in the order value descending, token ascending among equal values; each with its
// token id and log_softmax(x[r])[j] of the row before suppression (the greedy score's term).
//
// log_softmax is float32 math on the row as in ops/log_softmax.h: m = max x, s = sum exp(x - m),
// (x - m) - log s. The CPU body sums in double, the CUDA body in float32 per thread and then by
// a block reduction, so the values agree to a few 1e-7, not bit for bit.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

struct TopCandidates {
  Tensor values;     // float32 [R, k], host
  Tensor tokens;     // int64 [R, k], host
  Tensor log_probs;  // float32 [R, k], host
};

enum class CandidateRank { kByLogit, kByLogProb };

// logits: [R, V] float32 (CPU) or float32 / float16 / bfloat16 (CUDA); suppressed: uint8 [V] on
// the logits' device, or undefined for none; offsets: float32 [R] on the logits' device, or
// undefined for zeros (kByLogProb only). 1 <= k <= V. Results on the host.
TopCandidates top_candidates(const Tensor& logits, const Tensor& suppressed, const Tensor& offsets,
                             int64_t k, CandidateRank rank);

}  // namespace oasr::ops
