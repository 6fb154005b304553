// Attention rescoring (WeNet's attention_rescoring in wenet/transformer/
// search.py): the CTC prefix beam search's n-best list is re-scored with the
// attention decoder, left-to-right and optionally right-to-left (U2++).
//
// The model plugs in through AttentionDecoderFn: it receives the decoder
// inputs built here exactly as WeNet builds them (<sos> + hypothesis, padded
// with <eos>; the reversed hypothesis likewise) and returns the decoders'
// log-softmax outputs. Scoring then follows WeNet to the bit: WeNet sums the
// decoder's float32 log-probs as float32 tensors, so this does too (each
// operation rounded to float32, constants rounded to float32 first), and only
// the CTC score enters in double before that final float32 addition.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "decode/ctc_search.h"

namespace oasr::decode {

// Token ids with a special meaning to the attention decoder. WeNet's models
// (without special_tokens in their config) use blank 0, sos = eos = V - 1 and
// pad targets with ignore_id -1.
struct SpecialTokens {
  int64_t blank = 0;
  int64_t sos = -1;
  int64_t eos = -1;
  int64_t ignore_id = -1;

  static SpecialTokens wenet_default(int64_t vocab_size);
};

// ---- WeNet's padding helpers (wenet/utils/common.py) -------------------------

// pad_sequence(batch_first=True): int64 [N, max length], rows padded with
// pad_value. N must be at least 1; the width is 0 when every row is empty.
Tensor pad_token_lists(const std::vector<std::vector<int64_t>>& rows, int64_t pad_value);

// add_sos_eos: from targets padded with ignore_id [N, L], the decoder input
// (<sos> + tokens, padded with <eos>) and target (tokens + <eos>, padded with
// ignore_id), both int64 [N, L' + 1] where L' is the longest unpadded row.
// Every ignore_id entry is dropped, wherever it stands (as WeNet does).
struct SosEosTargets {
  Tensor decoder_input;
  Tensor decoder_target;
};
SosEosTargets add_sos_eos(const Tensor& ys_pad, int64_t sos, int64_t eos, int64_t ignore_id);

// reverse_pad_list: the first ys_lens[i] tokens of row i reversed, padded
// with pad_value to the longest length. ys_pad int32/int64 [N, L], ys_lens
// int32/int64 [N] with 0 <= ys_lens[i] <= L; returns int64 [N, max(ys_lens)].
Tensor reverse_pad_list(const Tensor& ys_pad, const Tensor& ys_lens, int64_t pad_value);

// ---- rescoring ----------------------------------------------------------------

// What the attention decoder consumes for N hypotheses of longest length L.
struct AttentionDecoderInputs {
  Tensor hyps;           // int64 [N, L + 1]: <sos> tokens <eos> <eos> ...
  Tensor hyps_lens;      // int64 [N]: tokens + 1 (counts <sos>)
  Tensor reversed_hyps;  // int64 [N, L + 1]: <sos> reversed tokens <eos> ...
};

// What it returns: log-softmax over the vocabulary at each input position,
// float32 [N, L + 1, V] on the CPU. `right` (from the right-to-left decoder)
// may be left undefined when reverse_weight is 0 or the model has none.
struct AttentionDecoderOutputs {
  Tensor left;
  Tensor right;
};

using AttentionDecoderFn =
    std::function<AttentionDecoderOutputs(const AttentionDecoderInputs& inputs)>;

struct AttentionRescoringOptions {
  double ctc_weight = 0.0;      // weight of the CTC prefix score, >= 0
  double reverse_weight = 0.0;  // share of the right-to-left decoder, in [0, 1]
};

struct AttentionRescoringResult {
  size_t best_index = 0;        // into the n-best list (the first on ties)
  std::vector<int64_t> tokens;  // the best hypothesis
  // The best total score, -inf when no hypothesis beats -inf (WeNet's start).
  double score = 0.0;
  std::vector<double> hypothesis_scores;  // every hypothesis' total, n-best order
};

// Builds the decoder inputs for an n-best list as WeNet's
// forward_attention_decoder does. Refuses an empty list.
AttentionDecoderInputs make_attention_decoder_inputs(const std::vector<CtcHypothesis>& nbest,
                                                     const SpecialTokens& special);

// Scores the n-best list given the decoders' outputs for
// make_attention_decoder_inputs(nbest, ...): for each hypothesis, the sum of
// the left decoder's log-probs of its tokens and of <eos> after them; with
// reverse_weight > 0, the same over the right decoder with the reversed
// tokens, mixed as left * (1 - w) + right * w; then + ctc_weight * CTC score.
// Refuses reverse_weight > 0 without right-to-left outputs (WeNet would
// silently score left-only), shapes that do not fit the n-best list, token
// ids outside the vocabulary.
AttentionRescoringResult score_attention_rescoring(const std::vector<CtcHypothesis>& nbest,
                                                   const AttentionDecoderOutputs& outputs,
                                                   int64_t eos,
                                                   const AttentionRescoringOptions& options);

// make_attention_decoder_inputs, the decoder, then score_attention_rescoring.
AttentionRescoringResult attention_rescoring(const std::vector<CtcHypothesis>& nbest,
                                             const AttentionDecoderFn& decoder,
                                             const SpecialTokens& special,
                                             const AttentionRescoringOptions& options);

}  // namespace oasr::decode
