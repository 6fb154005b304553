#include "decode/whisper_long_form.h"

#include <zlib.h>

#include "core/error.h"

namespace oasr::decode {

namespace {

// Whisper's timestamp tokens step by 20 ms (HF's time_precision); one
// timestamp step is 2 mel frames (the encoder's input stride).
constexpr double kTimestampSeconds = 0.02;
constexpr int64_t kFramesPerTimestamp = 2;
constexpr double kFramesPerSecond = 100.0;

}  // namespace

WindowSeek seek_window_segments(std::span<const int64_t> tokens, int64_t timestamp_begin,
                                int64_t window_frames) {
  OASR_CHECK(window_frames > 0, kInvalidArgument,
             "seek_window_segments: window_frames must be > 0, got ", window_frames);
  const auto is_timestamp = [&](size_t i) { return tokens[i] >= timestamp_begin; };
  const auto index_of = [&](size_t i) { return tokens[i] - timestamp_begin; };
  const size_t n = tokens.size();
  // Cuts: after the first timestamp of each consecutive pair (HF's
  // timestamp_segment_indices + 1).
  std::vector<size_t> cuts;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (is_timestamp(i) && is_timestamp(i + 1)) cuts.push_back(i + 1);
  }
  const bool single_timestamp_ending = n >= 2 && !is_timestamp(n - 2) && is_timestamp(n - 1);

  WindowSeek out;
  if (!cuts.empty()) {
    if (single_timestamp_ending) cuts.push_back(n);
    size_t last = 0;
    for (const size_t cut : cuts) {
      out.segments.push_back(
          WindowSegment{last, cut, static_cast<double>(index_of(last)) * kTimestampSeconds,
                        static_cast<double>(index_of(cut - 1)) * kTimestampSeconds});
      last = cut;
    }
    out.advance_frames =
        single_timestamp_ending ? window_frames : index_of(last - 1) * kFramesPerTimestamp;
    return out;
  }
  double end = static_cast<double>(window_frames) / kFramesPerSecond;
  for (size_t i = n; i-- > 0;) {
    if (!is_timestamp(i)) continue;
    if (tokens[i] != timestamp_begin) end = static_cast<double>(index_of(i)) * kTimestampSeconds;
    break;
  }
  out.segments.push_back(WindowSegment{0, n, 0.0, end});
  out.advance_frames = window_frames;
  return out;
}

double whisper_compression_ratio(const std::string& text) {
  if (text.empty()) return 0.0;
  uLongf size = compressBound(static_cast<uLong>(text.size()));
  std::vector<Bytef> packed(size);
  const int status = compress2(packed.data(), &size, reinterpret_cast<const Bytef*>(text.data()),
                               static_cast<uLong>(text.size()), Z_DEFAULT_COMPRESSION);
  OASR_CHECK(status == Z_OK, kInternal, "zlib compress2 failed (", status, ") on ", text.size(),
             " bytes");
  return static_cast<double>(text.size()) / static_cast<double>(size);
}

WhisperFallback WhisperFallback::resolve(const std::vector<double>& temperatures,
                                         std::optional<double> compression_ratio_threshold,
                                         std::optional<double> logprob_threshold,
                                         std::optional<double> no_speech_threshold) {
  WhisperFallback out;
  out.temperatures = temperatures;
  OASR_CHECK(!out.temperatures.empty(), kInvalidArgument,
             "temperatures (--temperatures) needs at least one value");
  out.compression_ratio_threshold = compression_ratio_threshold;
  out.logprob_threshold = logprob_threshold;
  out.no_speech_threshold = no_speech_threshold;
  if (out.temperatures.size() > 1) {
    if (!out.compression_ratio_threshold) out.compression_ratio_threshold = 2.4;
    if (!out.logprob_threshold) out.logprob_threshold = -1.0;
    if (!out.no_speech_threshold) out.no_speech_threshold = 0.6;
  }
  return out;
}

FallbackVerdict judge_decode(const WhisperFallback& rules, double compression_ratio,
                             double avg_logprob, double no_speech_prob) {
  FallbackVerdict v;
  const bool low_logprob = rules.logprob_threshold && avg_logprob < *rules.logprob_threshold;
  if (rules.compression_ratio_threshold && compression_ratio > *rules.compression_ratio_threshold) {
    v.rejected = true;
  }
  if (low_logprob) v.rejected = true;
  const bool no_speech = rules.no_speech_threshold && no_speech_prob > *rules.no_speech_threshold;
  if (no_speech && low_logprob) v.rejected = false;
  v.skip = no_speech && !(rules.logprob_threshold && avg_logprob > *rules.logprob_threshold);
  return v;
}

}  // namespace oasr::decode
