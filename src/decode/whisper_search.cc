#include "decode/whisper_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/cancellation.h"
#include "core/error.h"
#include "decode/ctc_search.h"
#include "ops/log_softmax.h"
#include "ops/top_candidates.h"

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

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

bool WhisperSearchOptions::is_eos(int64_t token) const {
  return token == eos_token_id || std::find(more_eos_token_ids.begin(), more_eos_token_ids.end(),
                                            token) != more_eos_token_ids.end();
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
  OASR_CHECK(std::isfinite(temperature) && temperature >= 0.0, kInvalidArgument,
             "whisper search: temperature must be a finite number >= 0, got ", temperature);
  OASR_CHECK(num_beams == 1 || (temperature == 0.0 && !filtered_log_probs), kInvalidArgument,
             "whisper search: sampling (temperature ", temperature,
             ") and filtered log-probabilities are greedy search's; beam search (num_beams ",
             num_beams, ") takes neither");
  if (timestamps) {
    OASR_CHECK(
        timestamps->timestamp_begin > eos_token_id && timestamps->no_timestamps_token_id >= 0,
        kInvalidArgument, "whisper search: timestamp tokens need <|notimestamps|> (",
        timestamps->no_timestamps_token_id, ") set and <|0.00|> (", timestamps->timestamp_begin,
        ") above eos (", eos_token_id, ")");
    OASR_CHECK(timestamps->max_initial_timestamp_index.value_or(0) >= 0, kInvalidArgument,
               "whisper search: max_initial_timestamp_index must be >= 0, got ",
               *timestamps->max_initial_timestamp_index);
  }
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
  if (timestamps) {
    out << " timestamps(begin=" << timestamps->timestamp_begin << " max_initial="
        << (timestamps->max_initial_timestamp_index
                ? std::to_string(*timestamps->max_initial_timestamp_index)
                : std::string("none"))
        << ")";
  }
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

// Runs one decoder step and checks what it returns: [rows, V] logits.
Tensor run_step(WhisperDecoderStep& step, const Tensor& tokens) {
  Tensor logits = step.step(tokens);
  OASR_CHECK(logits.defined() && logits.dim() == 2 && logits.size(0) == tokens.size(0) &&
                 logits.size(1) > 0,
             kInternal, "whisper search: the decoder step returned ",
             logits.defined() ? shape_str(logits.shape()) : std::string("nothing"), " for ",
             tokens.size(0), " rows; expected [rows, vocab]");
  return logits.contiguous();
}

// Where the step's logits are on a device, the search reduces them there
// (ops/top_candidates.h) and only k candidates per row cross to the host.
// The timestamp rules read every row's whole distribution with the row's
// own history, so with timestamps the rows cross whole, as on the CPU.
bool reduce_on_device(const Tensor& logits, const WhisperSearchOptions& options) {
  return !logits.device().is_cpu() && !options.timestamps && options.temperature == 0.0 &&
         !options.filtered_log_probs;
}

// splitmix64: one 64-bit state per utterance (the generator of
// java.util.SplittableRandom; a Weyl sequence through a 64-bit mixer).
uint64_t splitmix64(uint64_t& state) {
  return mix64(state += 0x9E3779B97F4A7C15ULL);
}

// log_softmax(processed)[token] from the unprocessed row's log_softmax: the
// processors only set entries to -inf, so the processed normaliser is the
// unprocessed one plus log(the kept tokens' probability mass), summed in
// double over whichever of the kept or the removed tokens are fewer.
// (1 - removed mass is used only while the removed tokens hold at most half
// the mass, so it never cancels to rounding noise.)
double filtered_log_prob(std::span<const float> processed, std::span<const float> log_probs,
                         int64_t token) {
  const auto removed_at = [&](size_t v) {
    return processed[v] == kMinusInf && log_probs[v] != kMinusInf;
  };
  int64_t removed = 0;
  for (size_t v = 0; v < processed.size(); ++v) removed += removed_at(v) ? 1 : 0;
  double kept_mass = -1.0;
  if (removed * 2 < static_cast<int64_t>(processed.size())) {
    double removed_mass = 0.0;
    for (size_t v = 0; v < processed.size(); ++v) {
      if (removed_at(v)) removed_mass += std::exp(static_cast<double>(log_probs[v]));
    }
    if (removed_mass <= 0.5) kept_mass = 1.0 - removed_mass;
  }
  if (kept_mass < 0.0) {
    kept_mass = 0.0;
    for (size_t v = 0; v < processed.size(); ++v) {
      if (processed[v] != kMinusInf) kept_mass += std::exp(static_cast<double>(log_probs[v]));
    }
  }
  return static_cast<double>(log_probs[static_cast<size_t>(token)]) - std::log(kept_mass);
}

// A token drawn from softmax(row / temperature) with a uniform draw of the
// generator: the first index whose running sum of exp((x - max) / T)
// exceeds u * total.
int64_t sample_token(std::span<const float> row, double temperature, uint64_t& state) {
  double peak = -std::numeric_limits<double>::infinity();
  for (const float v : row) peak = std::max(peak, static_cast<double>(v));
  OASR_CHECK(std::isfinite(peak), kInternal, "whisper sampling: every token is suppressed");
  double total = 0.0;
  for (const float v : row) {
    if (v != kMinusInf) total += std::exp((static_cast<double>(v) - peak) / temperature);
  }
  const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
  const double target = u * total;
  double running = 0.0;
  int64_t last_possible = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == kMinusInf) continue;
    const double p = std::exp((static_cast<double>(row[i]) - peak) / temperature);
    if (p == 0.0) continue;
    running += p;
    last_possible = static_cast<int64_t>(i);
    if (running > target) return last_possible;
  }
  return last_possible;  // rounding left target at the very top
}

Tensor host_f32(const Tensor& logits) {
  return logits.to(Device::cpu()).to(DType::kF32).contiguous();
}

// The suppress processors as uint8 masks on the logits' device: every step's
// and the first generated position's (begin_suppress_tokens added).
class SuppressMasks {
 public:
  const Tensor& get(const Tensor& logits, const WhisperSearchOptions& options, bool first) {
    if (!always_.defined()) {
      const int64_t vocab = logits.size(1);
      std::vector<uint8_t> always(static_cast<size_t>(vocab), 0);
      const auto mark = [&](std::vector<uint8_t>& mask, const std::vector<int64_t>& ids) {
        for (const int64_t id : ids) {
          if (id >= 0 && id < vocab) mask[static_cast<size_t>(id)] = 1;
        }
      };
      mark(always, options.suppress_tokens);
      std::vector<uint8_t> at_first = always;
      mark(at_first, options.begin_suppress_tokens);
      always_ = Tensor::from_vector(always, {vocab}).to(logits.device());
      first_ = Tensor::from_vector(at_first, {vocab}).to(logits.device());
    }
    return first ? first_ : always_;
  }

 private:
  Tensor always_, first_;
};

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

// The scores a row gets from every processor of the step, in HF's order:
// begin_suppress_tokens, suppress_tokens, then the timestamp rules.
void process(std::span<float> row, std::span<const int64_t> generated,
             const WhisperSearchOptions& options) {
  suppress(row, options, generated.empty());
  if (options.timestamps) {
    apply_timestamp_rules(row, generated, *options.timestamps, options.eos_token_id);
  }
}

// A beam search candidate: its running score, the row it extends, the token.
struct Candidate {
  float score;
  int64_t row;
  int64_t token;
};

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

void apply_timestamp_rules(std::span<float> row, std::span<const int64_t> generated,
                           const WhisperTimestampRules& rules, int64_t eos_token_id) {
  const auto vocab = static_cast<int64_t>(row.size());
  const int64_t begin = std::clamp<int64_t>(rules.timestamp_begin, 0, vocab);
  // row[from, to) = -inf, both clamped to the row (Python slices clamp).
  const auto mask = [&](int64_t from, int64_t to) {
    from = std::clamp<int64_t>(from, 0, vocab);
    to = std::clamp<int64_t>(to, 0, vocab);
    for (int64_t v = from; v < to; ++v) row[v] = kMinusInf;
  };
  if (rules.no_timestamps_token_id >= 0 && rules.no_timestamps_token_id < vocab) {
    row[rules.no_timestamps_token_id] = kMinusInf;
  }
  const size_t n = generated.size();
  const bool last_was_timestamp = n >= 1 && generated[n - 1] >= rules.timestamp_begin;
  const bool penultimate_was_timestamp = n < 2 || generated[n - 2] >= rules.timestamp_begin;
  if (last_was_timestamp) {
    if (penultimate_was_timestamp) {
      mask(begin, vocab);  // has to be text
    } else {
      mask(0, eos_token_id);  // has to be a timestamp or eos
    }
  }
  for (size_t i = n; i-- > 0;) {
    if (generated[i] < rules.timestamp_begin) continue;
    // Timestamps do not decrease; a closed pair's end may not repeat.
    const int64_t last =
        last_was_timestamp && !penultimate_was_timestamp ? generated[i] : generated[i] + 1;
    mask(begin, last);
    break;
  }
  if (n == 0) {
    mask(0, begin);
    if (rules.max_initial_timestamp_index) {
      mask(rules.timestamp_begin + *rules.max_initial_timestamp_index + 1, vocab);
    }
  }
  // HF compares the timestamps' logsumexp under log_softmax(row) with the
  // best text token's log-probability; log_softmax's normaliser is on both
  // sides, so the comparison needs only the timestamps' logsumexp and the
  // two maxima (a pass of exp over the 1501 timestamps, not the vocabulary).
  float max_timestamp = kMinusInf;
  float max_text = kMinusInf;
  for (int64_t v = 0; v < begin; ++v) max_text = std::max(max_text, row[v]);
  for (int64_t v = begin; v < vocab; ++v) max_timestamp = std::max(max_timestamp, row[v]);
  if (max_timestamp == kMinusInf || max_text == kMinusInf) return;
  double sum = 0.0;
  for (int64_t v = begin; v < vocab; ++v) {
    sum += std::exp(static_cast<double>(row[v]) - max_timestamp);
  }
  const double timestamp_logprob = max_timestamp + std::log(sum);
  const auto max_text_logprob = static_cast<double>(max_text);
  if (timestamp_logprob > max_text_logprob) mask(0, begin);
}

std::vector<TimestampSegment> timestamp_segments(std::span<const int64_t> tokens,
                                                 int64_t timestamp_begin) {
  const size_t n = tokens.size();
  const auto is_timestamp = [&](size_t i) { return tokens[i] >= timestamp_begin; };
  std::vector<size_t> cuts;  // the second token of every consecutive timestamp pair
  size_t count = 0;
  std::optional<size_t> first_timestamp, last_timestamp;
  for (size_t i = 0; i < n; ++i) {
    if (!is_timestamp(i)) continue;
    ++count;
    if (!first_timestamp) first_timestamp = i;
    last_timestamp = i;
    if (i + 1 < n && is_timestamp(i + 1)) cuts.push_back(i + 1);
  }
  if (cuts.empty() && count <= 1) return {};
  if (std::find(cuts.begin(), cuts.end(), *last_timestamp + 1) == cuts.end()) {
    cuts.push_back(*last_timestamp + 1);
  }
  std::vector<TimestampSegment> segments;
  size_t last_slice = *first_timestamp;
  int64_t current_max = 0;
  int64_t previous_segments = 0;
  for (const size_t cut : cuts) {
    if (cut - last_slice > 1) {
      const int64_t start = tokens[last_slice] - timestamp_begin;
      const int64_t end = tokens[cut - 1] - timestamp_begin;
      if (start < current_max) previous_segments += current_max;  // a new window's times
      current_max = end;
      segments.push_back({last_slice, cut, start + previous_segments, end + previous_segments});
    }
    last_slice = cut;
  }
  return segments;
}

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
  const bool sampling = options.temperature > 0.0;
  OASR_CHECK(!sampling || options.sample_seeds.size() == static_cast<size_t>(batch),
             kInvalidArgument, "whisper sampling: ", options.sample_seeds.size(),
             " sample seeds for ", batch, " utterances; give one per utterance");
  std::vector<uint64_t> generators = options.sample_seeds;
  Tensor tokens = token_rows(std::vector<std::vector<int64_t>>(batch, options.prompt));
  std::vector<float> processed;
  SuppressMasks masks;
  for (int64_t cur_len = prompt_len;;) {
    throw_if_cancelled();  // one decode step per check (core/cancellation.h)
    Tensor logits = run_step(step, tokens);
    const auto rows = static_cast<int64_t>(active.size());
    std::vector<int64_t> next(static_cast<size_t>(rows));
    std::vector<float> chosen_log_prob(static_cast<size_t>(rows));
    if (reduce_on_device(logits, options)) {
      const ops::TopCandidates best =
          ops::top_candidates(logits, masks.get(logits, options, cur_len == prompt_len), Tensor(),
                              1, ops::CandidateRank::kByLogit);
      for (int64_t i = 0; i < rows; ++i) {
        next[i] = best.tokens.data<int64_t>()[i];
        chosen_log_prob[i] = best.log_probs.data<float>()[i];
      }
    } else {
      logits = host_f32(logits);
      const int64_t vocab = logits.size(1);
      const Tensor log_probs = ops::log_softmax(logits).contiguous();
      for (int64_t i = 0; i < rows; ++i) {
        if (!unfinished[active[static_cast<size_t>(i)]]) continue;
        const float* row = logits.data<float>() + i * vocab;
        const int64_t b = active[static_cast<size_t>(i)];
        processed.assign(row, row + vocab);
        process(processed, out[b].tokens, options);
        next[i] = sampling ? sample_token(processed, options.temperature, generators[b])
                           : torch_argmax(processed);
        chosen_log_prob[i] = log_probs.data<float>()[i * vocab + next[i]];
        if (options.filtered_log_probs) {
          out[b].filtered_log_prob +=
              filtered_log_prob(processed,
                                std::span<const float>(log_probs.data<float>() + i * vocab,
                                                       static_cast<size_t>(vocab)),
                                next[i]);
        }
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t b = active[static_cast<size_t>(i)];
      if (!unfinished[b]) {
        next[i] = options.pad_token_id;  // HF feeds finished rows the pad token
        continue;
      }
      out[b].score += chosen_log_prob[i];
    }
    ++cur_len;
    std::vector<int64_t> still_running;  // row indices of the step
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t b = active[static_cast<size_t>(i)];
      if (!unfinished[b]) continue;
      if (options.is_eos(next[i])) {
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
  // Candidates ranked per utterance: enough that num_beams survive every eos
  // id (HF's max(2, 1 + eos ids) * num_beams).
  const auto eos_ids = 1 + static_cast<int64_t>(options.more_eos_token_ids.size());
  const int64_t kept = std::max<int64_t>(2, 1 + eos_ids) * beams;
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
  SuppressMasks masks;
  for (int64_t cur_len = prompt_len;;) {
    throw_if_cancelled();  // one decode step per check (core/cancellation.h)
    Tensor logits = run_step(step, tokens);
    // Per utterance, its 2 * num_beams best (score, row, token) candidates
    // in rank order.
    std::vector<std::vector<Candidate>> candidates(static_cast<size_t>(batch));
    if (reduce_on_device(logits, options)) {
      // Each row's 2K best suffice: a row adds one score to all its tokens.
      const int64_t k = kept;
      const Tensor offsets = Tensor::from_vector(beam_scores, {rows}).to(logits.device());
      const ops::TopCandidates best =
          ops::top_candidates(logits, masks.get(logits, options, cur_len == prompt_len), offsets, k,
                              ops::CandidateRank::kByLogProb);
      const int64_t vocab = logits.size(1);
      for (int64_t b = 0; b < batch; ++b) {
        if (done[b]) continue;
        std::vector<Candidate>& list = candidates[static_cast<size_t>(b)];
        for (int64_t r = b * beams; r < (b + 1) * beams; ++r) {
          for (int64_t i = 0; i < k; ++i) {
            list.push_back(
                {best.values.data<float>()[r * k + i], r, best.tokens.data<int64_t>()[r * k + i]});
          }
        }
        // Rank as one flat [beams * vocab] row: score, then flat index.
        std::sort(list.begin(), list.end(), [&](const Candidate& a, const Candidate& c) {
          return a.score > c.score ||
                 (a.score == c.score && a.row * vocab + a.token < c.row * vocab + c.token);
        });
        list.resize(static_cast<size_t>(k));
      }
    } else {
      logits = host_f32(logits);
      const int64_t vocab = logits.size(1);
      // log_softmax first, then the processors, then the running score: the
      // order of _beam_search (the suppressed tokens' mass stays in the sum).
      Tensor scores = ops::log_softmax(logits).contiguous();
      float* data = scores.data<float>();
      for (int64_t r = 0; r < rows; ++r) {
        std::span<float> row(data + r * vocab, static_cast<size_t>(vocab));
        const std::span<const int64_t> generated(sequences[r].data() + prompt_len,
                                                 sequences[r].size() - prompt_len);
        process(row, generated, options);
        for (float& v : row) v += beam_scores[r];
      }
      for (int64_t b = 0; b < batch; ++b) {
        if (done[b]) continue;
        const std::span<const float> flat(data + b * beams * vocab,
                                          static_cast<size_t>(beams * vocab));
        for (const int64_t at : torch_cpu_topk(flat, kept)) {
          candidates[static_cast<size_t>(b)].push_back(
              {flat[at], b * beams + at / vocab, at % vocab});
        }
      }
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
      const std::vector<Candidate>& ranked = candidates[static_cast<size_t>(b)];
      int64_t filled = 0;
      for (size_t rank = 0; rank < ranked.size() && filled < beams; ++rank) {
        const int64_t source = ranked[rank].row;
        const int64_t token = ranked[rank].token;
        const float score = ranked[rank].score;
        if (options.is_eos(token)) {
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
                 " non-eos candidates among the top ", kept);
      done[b] = hyps[b].is_done(ranked.front().score, cur_len + 1, prompt_len);
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
