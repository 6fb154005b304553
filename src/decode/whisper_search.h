// Whisper decoding as Hugging Face transformers 4.46.3 does it for short-form
// transcription without timestamps (WhisperForConditionalGeneration.generate
// with num_beams 1 -> GenerationMixin._sample, num_beams > 1 ->
// _beam_search + BeamSearchScorer), result for result:
//
//  - every row starts from the forced prompt (<|startoftranscript|>
//    [<|lang|> <|transcribe|>] <|notimestamps|>), fed to the decoder at once;
//  - SuppressTokensLogitsProcessor: suppress_tokens get -inf at every step;
//    SuppressTokensAtBeginLogitsProcessor: begin_suppress_tokens get -inf at
//    the first generated position only (input length == prompt length);
//  - greedy: argmax of the processed logits, ties to the lowest index as
//    torch.argmax; a row stops at eos, the batch at max_length total tokens
//    (prompt included) or when every row has stopped;
//  - beam search: log_softmax of the logits, then the processors, plus the
//    running beam score (float32, as torch adds them); the first beam starts
//    at 0 and the others at -1e9; per utterance the 2 * num_beams best of
//    num_beams * V candidates in torch's CPU topk order; an eos candidate
//    ranked below num_beams is dropped, one ranked within becomes a finished
//    hypothesis scored sum_logprobs / generated_len ^ length_penalty, where
//    generated_len counts the tokens after the prompt, eos included; the
//    utterance is done by BeamHypotheses.is_done (early_stopping false: the
//    heuristic best_running_score / (cur_len - prompt_len) ^ length_penalty;
//    true; "never"); at max_length the running beams join the finished ones
//    with generated_len = their length after the prompt (no eos), and the
//    best scored hypothesis wins (among equal scores the last one added, as
//    Python's stable sorted + pop()).
//
// The search drives an abstract decoder step (logits for the next token of
// every row, and a row reorder for beam search), so it runs against the real
// model (engine/whisper_recognizer) and against fixed tables in tests.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oasr::decode {

// One decoder: rows are independent sequences sharing nothing but weights
// (each with its own self-attention cache and its own encoder output row).
// Row layout for a batch of B utterances searched with K beams: row
// b * K + k is beam k of utterance b (K = 1 for greedy).
class WhisperDecoderStep {
 public:
  virtual ~WhisperDecoderStep() = default;
  // tokens int64 [R, n]: n new tokens for every row (the prompt on the first
  // call, one token afterwards), appended after what each row has seen so
  // far. Returns logits [R, V] for the token after the last one: float32 on
  // the host, or on a CUDA device in any float dtype, where the search then
  // ranks the candidates (ops/top_candidates.h) and copies only those: the
  // same rules, with log_softmax summed in float32 on the device and exact
  // ties broken by token (beam search: by flat index) instead of torch's CPU
  // topk order.
  virtual Tensor step(const Tensor& tokens) = 0;
  // Row r continues the sequence of row source_rows[r] (R entries).
  virtual void reorder(std::span<const int64_t> source_rows) = 0;
  // Greedy search drops finished rows: afterwards the step holds only
  // rows[0..n) (ascending indices of the current rows), in that order, and
  // later steps take and return n rows. A step whose rows are computed
  // independently of one another can do this exactly; one that cannot
  // returns false and keeps every row (finished rows are then fed the pad
  // token, as Hugging Face's generate() does).
  virtual bool retain(std::span<const int64_t> rows) {
    (void)rows;
    return false;
  }
};

// Whisper's timestamp tokens, as transformers 4.46.3's
// WhisperTimeStampLogitsProcessor applies them after the suppress
// processors at every step (generate(return_timestamps=True); the prompt then
// has no <|notimestamps|>). With `generated` the row's tokens after the
// prompt:
//  - <|notimestamps|> always gets -inf;
//  - timestamps come in pairs: after a timestamp that follows a timestamp
//    (or is the first generated token) every timestamp gets -inf; after a
//    lone one every text token (ids below eos) gets -inf;
//  - timestamps do not decrease: those below the last one get -inf, and the
//    last one itself too unless it is the lone one just generated;
//  - at the first generated position every non-timestamp gets -inf, and
//    timestamps past max_initial_timestamp_index;
//  - when the timestamps' total probability (logsumexp of log_softmax over
//    them) exceeds the most probable text token's, every text token gets
//    -inf.
struct WhisperTimestampRules {
  int64_t no_timestamps_token_id = -1;
  int64_t timestamp_begin = -1;  // <|0.00|>; every id from here is a timestamp
  std::optional<int64_t> max_initial_timestamp_index;
};

// GenerationConfig.early_stopping of BeamSearchScorer: false (the default,
// a heuristic), true (stop once num_beams hypotheses are finished), "never".
enum class BeamEarlyStopping { kHeuristic, kWhenFull, kNever };
const char* beam_early_stopping_name(BeamEarlyStopping mode);  // "false", "true", "never"

struct WhisperSearchOptions {
  std::vector<int64_t> prompt;  // the forced decoder input ids, at least one
  int64_t eos_token_id = -1;
  int64_t pad_token_id = -1;  // what a finished greedy row is fed
  // More ids that end a hypothesis as eos does (generation_config.json's
  // eos_token_id list past its first); beam search then ranks
  // (1 + eos ids) * num_beams candidates per utterance, as HF does.
  std::vector<int64_t> more_eos_token_ids;
  std::vector<int64_t> suppress_tokens;
  std::vector<int64_t> begin_suppress_tokens;
  int64_t max_length = 448;  // total tokens, prompt included
  int64_t num_beams = 1;     // 1: greedy search
  double length_penalty = 1.0;
  BeamEarlyStopping early_stopping = BeamEarlyStopping::kHeuristic;
  // Set: timestamp tokens are generated under these rules (see above).
  std::optional<WhisperTimestampRules> timestamps;
  // Greedy search only. Above 0, each token is drawn from softmax(processed
  // logits / temperature) (openai-whisper's Categorical(logits=logits /
  // temperature) after its logit filters) instead of the argmax: utterance
  // b draws from a splitmix64 generator seeded with sample_seeds[b] (one seed
  // per utterance), uniform doubles of 53 bits, inverse CDF in double over
  // the vocabulary in index order. The logits are then processed on the host.
  double temperature = 0.0;
  std::vector<uint64_t> sample_seeds;
  // Greedy search only: fill WhisperHypothesis::filtered_log_prob (the
  // logits are then processed on the host).
  bool filtered_log_probs = false;

  // kInvalidArgument naming the field: empty prompt, max_length not above the
  // prompt length, num_beams < 1, negative token ids.
  void validate() const;
  bool is_eos(int64_t token) const;
  std::string dump() const;
};

struct WhisperHypothesis {
  // Generated after the prompt, eos excluded; timestamp tokens included
  // where the options ask for them.
  std::vector<int64_t> tokens;
  bool reached_eos = false;  // false: stopped at max_length
  // Beam search: HF's sequences_scores (sum_logprobs / generated_len ^
  // length_penalty). Greedy: the sum of the chosen tokens' log-probabilities
  // (log_softmax of the unprocessed logits), eos included.
  double score = 0.0;
  // With WhisperSearchOptions::filtered_log_probs: openai-whisper's
  // sum_logprobs, the sum over the generated tokens, eos included, of
  // log_softmax(processed logits) at temperature 1 (its logit filters = the
  // suppress and timestamp processors here).
  double filtered_log_prob = 0.0;
};

// Decodes `batch` utterances through `step`, which must hold batch *
// num_beams rows in the layout above. One hypothesis per utterance.
std::vector<WhisperHypothesis> whisper_search(WhisperDecoderStep& step, int64_t batch,
                                              const WhisperSearchOptions& options);

std::vector<WhisperHypothesis> whisper_greedy_search(WhisperDecoderStep& step, int64_t batch,
                                                     const WhisperSearchOptions& options);
std::vector<WhisperHypothesis> whisper_beam_search(WhisperDecoderStep& step, int64_t batch,
                                                   const WhisperSearchOptions& options);

// The timestamp rules above, in place on one row of scores (logits for
// greedy search, log-probabilities for beam search, as HF hands them on).
void apply_timestamp_rules(std::span<float> row, std::span<const int64_t> generated,
                           const WhisperTimestampRules& rules, int64_t eos_token_id);

// HF's WhisperTokenizer._compute_offsets over a hypothesis' tokens: the
// segments between consecutive timestamp pairs (a trailing lone timestamp
// closes the last one), as [first, last) token ranges with their start and
// end timestamp indices (seconds = index x 0.02). Text after the last
// timestamp belongs to no segment.
struct TimestampSegment {
  size_t first = 0, last = 0;  // tokens[first, last): the opening timestamp to the closing one
  int64_t start_index = 0, end_index = 0;
};
std::vector<TimestampSegment> timestamp_segments(std::span<const int64_t> tokens,
                                                 int64_t timestamp_begin);

// splitmix64's output mixer, a bijection of 64-bit words (the sampler's
// generator and its seeds).
uint64_t mix64(uint64_t z);

// The index of the largest value, the lowest one among equals; a NaN ranks
// above every number (torch.argmax on the CPU).
int64_t torch_argmax(std::span<const float> row);

}  // namespace oasr::decode
