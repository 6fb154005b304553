// Greedy transducer search batched over utterances, as NeMo's label-looping
// greedy_batch decodes RNN-T and TDT models (NeMo's transducer_decoding/
// rnnt_label_looping.py and tdt_label_looping.py, torch_impl): every row
// looks for its next non-blank label, blanks moving it along its frames; the
// rows that found one emit it and only they step the predictor; a frame that
// has emitted max_symbols labels is left. Per row this is:
//
//   t = 0; predictor primed with <SOS> (= blank)
//   while t < T:
//     repeat: k, d = argmax token logits, durations[argmax duration logits]
//             at (t, predictor); if k is blank: t += max(d, 1) (RNN-T: 1),
//             the row ends when t >= T
//     until k is not blank; emit k at frame t_k = t; t += d (RNN-T: 0)
//     step the predictor with k
//     if t < T, t == t_k and this frame has emitted max_symbols labels: t += 1
//
// The argmax takes the first of equal maxima (PyTorch's CPU max). The model
// is reached through TransducerSteps, so the search owns no tensors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace oasr::decode {

// What the search asks of a model. Rows are indices into the batch the
// model prepared (its encoder output and one predictor state per row).
class TransducerSteps {
 public:
  virtual ~TransducerSteps() = default;
  // The joint's output for each of `rows` on its frame `frames[i]` with the
  // row's current predictor output: float32 [rows, classes] on the host
  // (token logits, blank last; TDT: then the duration logits).
  virtual Tensor joint(std::span<const int64_t> rows, std::span<const int64_t> frames) = 0;
  // Steps the predictor of each of `rows` with `labels[i]`.
  virtual void predict(std::span<const int64_t> rows, std::span<const int64_t> labels) = 0;
};

struct TransducerGreedyOptions {
  int64_t blank_id = 0;  // the last token class
  // TDT: the frames each duration output stands for (the joint's last
  // durations.size() classes); empty for RNN-T.
  std::vector<int64_t> durations;
  int64_t max_symbols = 10;
};

struct TransducerHypothesis {
  std::vector<int64_t> tokens;
  std::vector<int64_t> frames;     // the encoder frame each token was emitted on
  std::vector<int64_t> durations;  // TDT: each token's predicted duration
  double score = 0.0;              // sum of the emitted tokens' log-softmax over the token classes
};

// frames_per_row[b]: row b's valid encoder frames (0 gives an empty result).
std::vector<TransducerHypothesis> transducer_greedy_search(TransducerSteps& steps,
                                                           std::span<const int64_t> frames_per_row,
                                                           const TransducerGreedyOptions& options);

}  // namespace oasr::decode
