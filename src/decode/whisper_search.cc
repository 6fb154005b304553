#include "decode/whisper_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/cancellation.h"
#include "core/error.h"
#include "decode/ctc_search.h"
#include "ops/log_softmax.h"

namespace oasr::decode {

const char* beam_early_stopping_name(BeamEarlyStopping mode) {
  switch (mode) {
    case BeamEarlyStopping::kHeuristic:
      return "false";
    case BeamEarlyStopping::kWhenFull:
      return "true";
    case BeamEarlyStopping::kNever:
      return "never";
  }
  return "unknown";
}

void WhisperSearchOptions::validate() const {
  OASR_CHECK(!prompt.empty(), kInvalidArgument,
             "whisper search: the decoder prompt is empty; it starts with <|startoftranscript|>");
  const auto prompt_length = static_cast<int64_t>(prompt.size());
  OASR_CHECK(max_length > prompt_length, kInvalidArgument, "whisper search: max_length ",
             max_length, " leaves no room after the ", prompt_length,
             "-token prompt; it counts the prompt, so use more than ", prompt_length);
  OASR_CHECK(num_beams >= 1, kInvalidArgument, "whisper search: num_beams must be >= 1, got ",
             num_beams);
  OASR_CHECK(eos_token_id >= 0 && pad_token_id >= 0, kInvalidArgument,
             "whisper search: eos_token_id (", eos_token_id, ") and pad_token_id (", pad_token_id,
             ") must be set");
  for (const int64_t id : prompt) {
    OASR_CHECK(id >= 0, kInvalidArgument, "whisper search: negative prompt token ", id);
  }
  OASR_CHECK(std::isfinite(length_penalty), kInvalidArgument,
             "whisper search: length_penalty must be finite, got ", length_penalty);
}

std::string WhisperSearchOptions::dump() const {
  std::ostringstream out;
  out << "prompt=[";
  for (size_t i = 0; i < prompt.size(); ++i) out << (i ? "," : "") << prompt[i];
  out << "] eos=" << eos_token_id << " pad=" << pad_token_id
      << " suppress_tokens=" << suppress_tokens.size()
      << " begin_suppress_tokens=" << begin_suppress_tokens.size() << " max_length=" << max_length
      << " num_beams=" << num_beams << " length_penalty=" << length_penalty
      << " early_stopping=" << beam_early_stopping_name(early_stopping);
  return out.str();
}

int64_t torch_argmax(std::span<const float> row) {
  OASR_CHECK(!row.empty(), kInvalidArgument, "torch_argmax: empty row");
  int64_t best = 0;
  for (size_t j = 0; j < row.size(); ++j) {
    if (std::isnan(row[j])) return static_cast<int64_t>(j);
    if (row[j] > row[best]) best = static_cast<int64_t>(j);
  }
  return best;
}

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Runs one decoder step and checks what it returns: float32 [rows, V].
Tensor run_step(WhisperDecoderStep& step, const Tensor& tokens) {
  Tensor logits = step.step(tokens);
  OASR_CHECK(logits.defined() && logits.dim() == 2 && logits.size(0) == tokens.size(0) &&
                 logits.dtype() == DType::kF32 && logits.size(1) > 0,
             kInternal, "whisper search: the decoder step returned ",
             logits.defined() ? shape_str(logits.shape()) : std::string("nothing"), " for ",
             tokens.size(0), " rows; expected float32 [rows, vocab]");
  return logits.contiguous();
}

Tensor token_rows(const std::vector<std::vector<int64_t>>& rows) {
  const auto n = static_cast<int64_t>(rows.front().size());
  std::vector<int64_t> flat;
  flat.reserve(rows.size() * rows.front().size());
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return Tensor::from_vector(flat, {static_cast<int64_t>(rows.size()), n});
}

// The logits processors of Whisper's short-form generate, in place on one
// row: suppress_tokens always, begin_suppress_tokens at the first generated
// position. Ids outside the vocabulary are ignored, as torch.isin over
// arange(V) ignores them.
void suppress(std::span<float> row, const WhisperSearchOptions& options, bool first_position) {
  const auto vocab = static_cast<int64_t>(row.size());
  const auto apply = [&](const std::vector<int64_t>& ids) {
    for (const int64_t id : ids) {
      if (id >= 0 && id < vocab) row[id] = kMinusInf;
    }
  };
  apply(options.suppress_tokens);
  if (first_position) apply(options.begin_suppress_tokens);
}

// ---- BeamHypotheses (transformers/generation/beam_search.py) ---------------

struct FinishedHypothesis {
  double score;
  std::vector<int64_t> tokens;  // prompt included, eos excluded
  bool reached_eos;
};

class BeamHypotheses {
 public:
  BeamHypotheses(int64_t num_beams, double length_penalty, BeamEarlyStopping early_stopping,
                 int64_t max_length)
      : num_beams_(num_beams),
        length_penalty_(length_penalty),
        early_stopping_(early_stopping),
        max_length_(max_length) {}

  void add(std::vector<int64_t> tokens, double sum_logprobs, int64_t generated_len,
           bool reached_eos) {
    // Python: sum_logprobs / (generated_len ** length_penalty), int ** float in double.
    const double score =
        sum_logprobs / std::pow(static_cast<double>(generated_len), length_penalty_);
    if (size() < num_beams_ || score > worst_score_) {
      beams_.push_back(FinishedHypothesis{score, std::move(tokens), reached_eos});
      if (size() > num_beams_) {
        // sorted((s, idx)): by score, then by position; drop the first.
        std::vector<std::pair<double, size_t>> order;
        for (size_t i = 0; i < beams_.size(); ++i) order.emplace_back(beams_[i].score, i);
        std::sort(order.begin(), order.end());
        beams_.erase(beams_.begin() + static_cast<std::ptrdiff_t>(order[0].second));
        worst_score_ = order[1].first;
      } else {
        worst_score_ = std::min(score, worst_score_);
      }
    }
  }

  bool is_done(double best_sum_logprobs, int64_t cur_len, int64_t prompt_len) const {
    if (size() < num_beams_) return false;
    switch (early_stopping_) {
      case BeamEarlyStopping::kWhenFull:
        return true;
      case BeamEarlyStopping::kHeuristic:
        return worst_score_ >=
               best_sum_logprobs /
                   std::pow(static_cast<double>(cur_len - prompt_len), length_penalty_);
      case BeamEarlyStopping::kNever: {
        const int64_t len = length_penalty_ > 0.0 ? max_length_ : cur_len;
        return worst_score_ >=
               best_sum_logprobs / std::pow(static_cast<double>(len - prompt_len), length_penalty_);
      }
    }
    return false;
  }

  // sorted(beams, key=score).pop(): the highest score, the last added among equals.
  const FinishedHypothesis& best() const {
    OASR_CHECK(!beams_.empty(), kInternal, "whisper beam search finished without hypotheses");
    size_t best = 0;
    for (size_t i = 1; i < beams_.size(); ++i) {
      if (beams_[i].score >= beams_[best].score) best = i;
    }
    return beams_[best];
  }

  int64_t size() const { return static_cast<int64_t>(beams_.size()); }

 private:
  int64_t num_beams_;
  double length_penalty_;
  BeamEarlyStopping early_stopping_;
  int64_t max_length_;
  std::vector<FinishedHypothesis> beams_;
  double worst_score_ = 1e9;
};

}  // namespace

std::vector<WhisperHypothesis> whisper_search(WhisperDecoderStep& step, int64_t batch,
                                              const WhisperSearchOptions& options) {
  return options.num_beams == 1 ? whisper_greedy_search(step, batch, options)
                                : whisper_beam_search(step, batch, options);
}

std::vector<WhisperHypothesis> whisper_greedy_search(WhisperDecoderStep& step, int64_t batch,
                                                     const WhisperSearchOptions& options) {
  options.validate();
  OASR_CHECK(batch >= 1, kInvalidArgument, "whisper greedy search: batch must be >= 1, got ",
             batch);
  const auto prompt_len = static_cast<int64_t>(options.prompt.size());
  std::vector<WhisperHypothesis> out(static_cast<size_t>(batch));
  std::vector<bool> unfinished(static_cast<size_t>(batch), true);
  // active[i]: the utterance of the step's row i. Finished rows leave the
  // step when it can drop them (WhisperDecoderStep::retain); otherwise they
  // stay and are fed the pad token.
  std::vector<int64_t> active(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) active[static_cast<size_t>(b)] = b;
  Tensor tokens = token_rows(std::vector<std::vector<int64_t>>(batch, options.prompt));
  std::vector<float> processed;
  for (int64_t cur_len = prompt_len;;) {
    throw_if_cancelled();  // one decode step per check (core/cancellation.h)
    const Tensor logits = run_step(step, tokens);
    const int64_t vocab = logits.size(1);
    const Tensor log_probs = ops::log_softmax(logits).contiguous();
    const auto rows = static_cast<int64_t>(active.size());
    std::vector<int64_t> next(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t b = active[static_cast<size_t>(i)];
      if (!unfinished[b]) {
        next[i] = options.pad_token_id;  // HF feeds finished rows the pad token
        continue;
      }
      const float* row = logits.data<float>() + i * vocab;
      processed.assign(row, row + vocab);
      suppress(processed, options, cur_len == prompt_len);
      next[i] = torch_argmax(processed);
      out[b].score += log_probs.data<float>()[i * vocab + next[i]];
    }
    ++cur_len;
    std::vector<int64_t> still_running;  // row indices of the step
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t b = active[static_cast<size_t>(i)];
      if (!unfinished[b]) continue;
      if (next[i] == options.eos_token_id) {
        out[b].reached_eos = true;
        unfinished[b] = false;
      } else {
        out[b].tokens.push_back(next[i]);
        if (cur_len >= options.max_length) unfinished[b] = false;
      }
      if (unfinished[b]) still_running.push_back(i);
    }
    if (still_running.empty()) break;
    if (static_cast<int64_t>(still_running.size()) < rows && step.retain(still_running)) {
      std::vector<int64_t> kept_active, kept_next;
      for (const int64_t i : still_running) {
        kept_active.push_back(active[static_cast<size_t>(i)]);
        kept_next.push_back(next[static_cast<size_t>(i)]);
      }
      active = std::move(kept_active);
      next = std::move(kept_next);
    }
    tokens = Tensor::from_vector(next, {static_cast<int64_t>(next.size()), 1});
  }
  return out;
}

std::vector<WhisperHypothesis> whisper_beam_search(WhisperDecoderStep& step, int64_t batch,
                                                   const WhisperSearchOptions& options) {
  options.validate();
  OASR_CHECK(batch >= 1, kInvalidArgument, "whisper beam search: batch must be >= 1, got ", batch);
  OASR_CHECK(options.num_beams >= 2, kInvalidArgument,
             "whisper beam search needs num_beams >= 2 (1 is greedy search), got ",
             options.num_beams);
  const int64_t beams = options.num_beams;
  const int64_t rows = batch * beams;
  const auto prompt_len = static_cast<int64_t>(options.prompt.size());

  std::vector<std::vector<int64_t>> sequences(static_cast<size_t>(rows), options.prompt);
  // The first beam of each utterance starts at 0, the others at -1e9, so the
  // first step expands one beam only (all rows hold the same prompt).
  std::vector<float> beam_scores(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    if (r % beams != 0) beam_scores[r] = -1e9f;
  }
  std::vector<BeamHypotheses> hyps;
  for (int64_t b = 0; b < batch; ++b) {
    hyps.emplace_back(beams, options.length_penalty, options.early_stopping, options.max_length);
  }
  std::vector<bool> done(static_cast<size_t>(batch), false);

  Tensor tokens = token_rows(sequences);
  std::vector<float> next_scores(static_cast<size_t>(rows));
  std::vector<int64_t> next_tokens(static_cast<size_t>(rows));
  std::vector<int64_t> source_rows(static_cast<size_t>(rows));
  for (int64_t cur_len = prompt_len;;) {
    throw_if_cancelled();  // one decode step per check (core/cancellation.h)
    const Tensor logits = run_step(step, tokens);
    const int64_t vocab = logits.size(1);
    // log_softmax first, then the processors, then the running score: the
    // order of _beam_search (the suppressed tokens' mass stays in the sum).
    Tensor scores = ops::log_softmax(logits).contiguous();
    float* data = scores.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      std::span<float> row(data + r * vocab, static_cast<size_t>(vocab));
      suppress(row, options, cur_len == prompt_len);
      for (float& v : row) v += beam_scores[r];
    }
    const int64_t generated_len = cur_len + 1 - prompt_len;  // eos included
    for (int64_t b = 0; b < batch; ++b) {
      if (done[b]) {
        // A finished utterance keeps feeding pad tokens (HF pads the batch);
        // its rows continue from themselves, which changes nothing.
        for (int64_t k = 0; k < beams; ++k) {
          next_scores[b * beams + k] = 0.0f;
          next_tokens[b * beams + k] = options.pad_token_id;
          source_rows[b * beams + k] = b * beams + k;
        }
        continue;
      }
      const std::span<const float> flat(data + b * beams * vocab,
                                        static_cast<size_t>(beams * vocab));
      const std::vector<int64_t> ranked = torch_cpu_topk(flat, 2 * beams);
      int64_t filled = 0;
      for (size_t rank = 0; rank < ranked.size() && filled < beams; ++rank) {
        const int64_t source = b * beams + ranked[rank] / vocab;
        const int64_t token = ranked[rank] % vocab;
        const float score = flat[ranked[rank]];
        if (token == options.eos_token_id) {
          // An eos outside the top num_beams candidates is not kept.
          if (static_cast<int64_t>(rank) >= beams) continue;
          hyps[b].add(sequences[source], score, generated_len, /*reached_eos=*/true);
        } else {
          next_scores[b * beams + filled] = score;
          next_tokens[b * beams + filled] = token;
          source_rows[b * beams + filled] = source;
          ++filled;
        }
      }
      OASR_CHECK(filled == beams, kInternal, "whisper beam search: only ", filled,
                 " non-eos candidates among the top ", 2 * beams);
      done[b] = hyps[b].is_done(flat[ranked.front()], cur_len + 1, prompt_len);
    }

    std::vector<std::vector<int64_t>> reordered(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      reordered[r] = sequences[source_rows[r]];
      reordered[r].push_back(next_tokens[r]);
    }
    sequences = std::move(reordered);
    beam_scores = next_scores;
    step.reorder(source_rows);
    ++cur_len;
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }) ||
        cur_len >= options.max_length) {
      break;
    }
    tokens = Tensor::from_vector(next_tokens, {rows, 1});
  }

  // finalize: the running beams of unfinished utterances join the finished ones.
  std::vector<WhisperHypothesis> out(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    if (!done[b]) {
      for (int64_t k = 0; k < beams; ++k) {
        const int64_t r = b * beams + k;
        const auto len = static_cast<int64_t>(sequences[r].size()) - prompt_len;
        hyps[b].add(sequences[r], beam_scores[r], len, /*reached_eos=*/false);
      }
    }
    const FinishedHypothesis& best = hyps[b].best();
    out[b].tokens.assign(best.tokens.begin() + prompt_len, best.tokens.end());
    out[b].reached_eos = best.reached_eos;
    out[b].score = best.score;
  }
  return out;
}

}  // namespace oasr::decode
