// CTC forced alignment: the most likely frame-level path (Viterbi) of a
// given token sequence through a model's CTC log-probabilities, the way
// CTC segmentation (torchaudio's forced_align, WeNet's alignment tool)
// defines it. It gives every token of a hypothesis its frames, whatever
// search chose the hypothesis (greedy, prefix beam, attention rescoring).
//
// Path: blank, t1, blank, t2, ..., blank (2L + 1 states); a state is kept,
// or left for the next one, or a blank is skipped between two different
// tokens. Scores are summed in double from the float32 log-probs. Ties are
// broken deterministically: staying beats advancing by one, which beats
// skipping a blank; at the end, a path ending in blank beats one ending in
// the last token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace oasr::decode {

// Token k of the sequence occupies frames [start_frame, end_frame).
struct TokenSpan {
  int64_t token;
  int64_t start_frame;
  int64_t end_frame;
};

// log_probs float32 [T, V] (CPU), tokens without blanks. Refused
// (kInvalidArgument) when a token is out of range or is the blank, or when
// T frames cannot hold the sequence (each token one frame, one blank between
// repeats). An empty sequence aligns to no spans.
std::vector<TokenSpan> ctc_forced_align(const Tensor& log_probs, std::span<const int64_t> tokens,
                                        int64_t blank_id = 0);

}  // namespace oasr::decode
