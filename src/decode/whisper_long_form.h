// Whisper's long-form transcription rules, as transformers 4.46.3's
// WhisperGenerationMixin.generate applies them to audio over 30 s (its
// sequential algorithm, ported from openai-whisper's transcribe()), and
// openai-whisper's temperature fallback.
//
// Sequential decoding: the whole utterance's log-mel
// (audio::WhisperLogMel::compute_whole) is cut at `seek` (in mel frames, 100
// per second) into a window of min(3000, frames - seek) frames, zero-padded to
// 3000 (the padding is the value 0 of the normalised log-mel, as HF pads the
// feature slice). The window is decoded with timestamp tokens; its tokens
// (eos removed) are cut into segments and `seek` advances by
// seek_window_segments below; the loop ends when seek reaches the frames.
//
// Temperature fallback (openai-whisper transcribe.decode_with_fallback, with
// its definitions): a window is decoded at temperatures[0]; while a
// threshold rejects the decode and temperatures remain, it is decoded again
// at the next one (greedy sampling). A decode is rejected when
//   compression_ratio(text) > compression_ratio_threshold   (too repetitive), or
//   avg_logprob < logprob_threshold,
// unless no_speech_prob > no_speech_threshold and avg_logprob <
// logprob_threshold (silence: kept, then skipped). The last decode stands
// when every temperature was rejected. A window is skipped (no segments,
// seek advances over it) when no_speech_prob > no_speech_threshold and not
// avg_logprob > logprob_threshold. With
//   text            the decoded text without timestamp tokens, stripped of
//                     surrounding whitespace (openai-whisper's
//                     tokenizer.decode(tokens).strip()),
//   compression_ratio(text) = len(utf8(text)) / len(zlib.compress(utf8(text)))
//                     (zlib's default level; 0 for empty text),
//   avg_logprob     = filtered_log_prob / (generated tokens + 1)
//                     (decode::WhisperHypothesis::filtered_log_prob; tokens
//                     without eos),
//   no_speech_prob  = softmax(logits after <|startoftranscript|> alone)
//                     [<|nospeech|>], the token before <|notimestamps|> (HF's
//                     no_timestamps_token_id - 1; <|nocaptions|> in the
//                     English-only vocabulary), unprocessed logits.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace oasr::decode {

// One segment of a decoded window: tokens[first, last), times in seconds
// from the window's start.
struct WindowSegment {
  size_t first = 0, last = 0;
  double start = 0.0, end = 0.0;
};

struct WindowSeek {
  std::vector<WindowSegment> segments;
  int64_t advance_frames = 0;  // how far seek moves, in mel frames
};

// HF's _retrieve_segment for a window of window_frames (<= 3000) mel frames
// whose decoded tokens (timestamps included, eos removed) are `tokens`:
//  - where two timestamps follow each other, the tokens are cut after the
//    first of each such pair; every piece up to the last cut is a segment
//    from its first to its last timestamp (index x 0.02 s); when the tokens
//    end in a lone timestamp (text, then one timestamp) the rest is a
//    segment too and seek advances by the whole window, else the tokens
//    after the last cut are dropped and seek advances to the last cut's
//    timestamp (index x 2 frames);
//  - with no such pair the whole window is one segment from 0 to its last
//    timestamp when it has one other than <|0.00|>, else to the window's
//    end, and seek advances by the whole window.
// Declared difference: in that last case HF's end is window_frames x 0.02 s
// (twice the window's duration); here it is window_frames / 100 s. A seek
// advance of 0 (a last pair at <|0.00|>) is returned as HF computes it; the
// recognizer then moves on by the whole window instead of decoding the same
// window forever.
WindowSeek seek_window_segments(std::span<const int64_t> tokens, int64_t timestamp_begin,
                                int64_t window_frames);

// openai-whisper's compression ratio of a text (see above).
double whisper_compression_ratio(const std::string& text);

// The fallback settings of one decode; resolved from the decode options.
struct WhisperFallback {
  std::vector<double> temperatures = {0.0};
  std::optional<double> compression_ratio_threshold;
  std::optional<double> logprob_threshold;
  std::optional<double> no_speech_threshold;

  // openai-whisper transcribe()'s defaults when more than one temperature
  // is given and a threshold is not: 2.4, -1.0, 0.6.
  static WhisperFallback resolve(const std::vector<double>& temperatures,
                                 std::optional<double> compression_ratio_threshold,
                                 std::optional<double> logprob_threshold,
                                 std::optional<double> no_speech_threshold);
  // Whether decodes are judged at all (any threshold set).
  bool judges() const {
    return compression_ratio_threshold || logprob_threshold || no_speech_threshold;
  }
  bool needs_no_speech_prob() const { return no_speech_threshold.has_value(); }
};

// What the thresholds say of one decode.
struct FallbackVerdict {
  bool rejected = false;  // decode again at the next temperature
  bool skip = false;      // silence: the window contributes no segment
};
FallbackVerdict judge_decode(const WhisperFallback& rules, double compression_ratio,
                             double avg_logprob, double no_speech_prob);

}  // namespace oasr::decode
