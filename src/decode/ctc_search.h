// CTC search over a model's CTC log-probabilities, reproducing WeNet's Python
// searches (wenet/transformer/search.py) result for result: greedy search and
// prefix beam search, with WeNet's tie-breaking. Ties matter in practice
// (quantized or saturated outputs repeat values), so the per-frame candidate
// order follows PyTorch's CPU topk exactly (see torch_cpu_topk below), the
// next-hypothesis table keeps first-insertion order like a Python dict, and
// the beam is pruned with a stable sort, as Python's sorted() is.
//
// Scores are computed in double from the float32 log-probs, as WeNet does with
// Python floats. Inputs are CPU float32 tensors; token ids are int64 (blank
// is 0 in WeNet's models).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace oasr::decode {

inline constexpr int64_t kDefaultBlankId = 0;

// log(exp(a) + exp(b)) computed the way WeNet's log_add does (max-shifted,
// -inf when both are -inf), so scores agree with WeNet's to the last bit
// given the same libm.
double log_add(double a, double b);

// Collapses runs of equal frame labels and drops the blank label
// (WeNet's remove_duplicates_and_blank): [0,1,1,0,1,2,2] -> [1,1,2].
std::vector<int64_t> remove_duplicates_and_blank(std::span<const int64_t> frame_labels,
                                                 int64_t blank_id = kDefaultBlankId);

// The k largest entries of `row`, in the order PyTorch 1.13's CPU topk
// (largest=true, sorted=true) returns them, ties included: that order is not
// "lowest index first" but whatever libstdc++'s partial_sort (when
// 64 * k <= n) or nth_element + sort (otherwise) leave behind, so the same
// algorithms are run here on the same (value, index) sequence. NaN ranks
// above every number, as in torch. Requires 1 <= k <= row.size().
std::vector<int64_t> torch_cpu_topk(std::span<const float> row, int64_t k);

// ---- greedy search ------------------------------------------------------------

// One utterance: log_probs float32 [T, V] -> token ids (argmax per frame as
// torch's topk(1) picks it, repeats collapsed, blanks dropped). T may be 0.
std::vector<int64_t> ctc_greedy_search(const Tensor& log_probs, int64_t blank_id = kDefaultBlankId);

// A padded batch: log_probs float32 [B, T, V], lengths int32/int64 [B] with
// 0 <= lengths[b] <= T; frames past an utterance's length are ignored.
std::vector<std::vector<int64_t>> ctc_greedy_search(const Tensor& log_probs, const Tensor& lengths,
                                                    int64_t blank_id = kDefaultBlankId);

// One token of the greedy path and the frame its run starts on (where it is
// emitted).
struct CtcEmission {
  int64_t token;
  int64_t frame;
};
// ctc_greedy_search's tokens for one utterance (log_probs float32 [T, V])
// with their emitting frames.
std::vector<CtcEmission> ctc_greedy_emissions(const Tensor& log_probs,
                                              int64_t blank_id = kDefaultBlankId);

// ---- prefix beam search -------------------------------------------------------

struct CtcHypothesis {
  std::vector<int64_t> tokens;
  double score = 0.0;  // log(p_blank_ending + p_nonblank_ending) of the prefix
};

struct CtcPrefixBeamSearchOptions {
  // Hypotheses kept after each frame, and candidate tokens tried per frame.
  // WeNet's per-frame topk(beam_size) fails when beam_size > V; here the
  // candidates are then all V tokens (in topk order), the natural extension.
  int64_t beam_size = 10;
  int64_t blank_id = kDefaultBlankId;
};

// One utterance: log_probs float32 [T, V] -> the n-best list, best first (at
// most beam_size entries; with T = 0 the single empty hypothesis, score 0).
// Refuses NaN or +inf log-probs (a broken model output; WeNet would rank
// them arbitrarily), beam_size < 1, V = 0.
std::vector<CtcHypothesis> ctc_prefix_beam_search(const Tensor& log_probs,
                                                  const CtcPrefixBeamSearchOptions& options);

// A padded batch: log_probs float32 [B, T, V], lengths int32/int64 [B].
std::vector<std::vector<CtcHypothesis>> ctc_prefix_beam_search(
    const Tensor& log_probs, const Tensor& lengths, const CtcPrefixBeamSearchOptions& options);

}  // namespace oasr::decode
