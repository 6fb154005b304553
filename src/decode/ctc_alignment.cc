// CTC forced alignment; see ctc_alignment.h.
#include "decode/ctc_alignment.h"

#include <limits>

#include "core/error.h"

namespace oasr::decode {

std::vector<TokenSpan> ctc_forced_align(const Tensor& log_probs, std::span<const int64_t> tokens,
                                        int64_t blank_id) {
  OASR_CHECK(log_probs.defined() && log_probs.dim() == 2 && log_probs.dtype() == DType::kF32 &&
                 log_probs.device().is_cpu(),
             kInvalidArgument, "ctc_forced_align: log_probs must be a CPU float32 [T, V] tensor");
  const int64_t frames = log_probs.size(0);
  const int64_t vocab = log_probs.size(1);
  const auto length = static_cast<int64_t>(tokens.size());
  if (length == 0) return {};
  int64_t repeats = 0;
  for (int64_t k = 0; k < length; ++k) {
    OASR_CHECK(tokens[k] >= 0 && tokens[k] < vocab && tokens[k] != blank_id, kInvalidArgument,
               "ctc_forced_align: token ", k, " is ", tokens[k], ", not a non-blank id in [0, ",
               vocab, ")");
    if (k > 0 && tokens[k] == tokens[k - 1]) ++repeats;
  }
  OASR_CHECK(frames >= length + repeats, kInvalidArgument, "ctc_forced_align: ", frames,
             " frames cannot hold ", length, " tokens with ", repeats, " repeats");
  const Tensor probs = log_probs.contiguous();
  const float* lp = probs.data<float>();
  const int64_t states = 2 * length + 1;
  const auto label = [&](int64_t s) { return s % 2 == 0 ? blank_id : tokens[s / 2]; };
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<double> score(states, kNone), next(states);
  // back[t * states + s]: the state at t - 1 on the best path into s at t.
  std::vector<int32_t> back(static_cast<size_t>(frames * states), -1);
  score[0] = lp[blank_id];
  score[1] = lp[tokens[0]];
  for (int64_t t = 1; t < frames; ++t) {
    const float* row = lp + t * vocab;
    for (int64_t s = 0; s < states; ++s) {
      double best = score[s];
      int64_t from = s;
      if (s >= 1 && score[s - 1] > best) {
        best = score[s - 1];
        from = s - 1;
      }
      if (s >= 2 && s % 2 == 1 && tokens[s / 2] != tokens[s / 2 - 1] && score[s - 2] > best) {
        best = score[s - 2];
        from = s - 2;
      }
      next[s] = best == kNone ? kNone : best + static_cast<double>(row[label(s)]);
      back[t * states + s] = static_cast<int32_t>(from);
    }
    score.swap(next);
  }
  int64_t state = score[states - 1] >= score[states - 2] ? states - 1 : states - 2;
  OASR_CHECK(score[state] != kNone, kInvalidArgument,
             "ctc_forced_align: no path has a finite score (every path meets a -inf log-prob)");
  std::vector<TokenSpan> spans(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) spans[k] = {tokens[k], -1, -1};
  for (int64_t t = frames - 1; t >= 0; --t) {
    if (state % 2 == 1) {
      TokenSpan& span = spans[state / 2];
      if (span.end_frame < 0) span.end_frame = t + 1;
      span.start_frame = t;
    }
    if (t > 0) state = back[t * states + state];
  }
  return spans;
}

}  // namespace oasr::decode
