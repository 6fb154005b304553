#include "decode/ctc_endpoint.h"

#include <cmath>

#include "core/error.h"

namespace oasr::decode {
namespace {

// Durations compare in whole milliseconds, as WeNet's runtime counts them
// (frames x frame shift in ms), so 25 frames of 40 ms are exactly 1 s.
int64_t milliseconds(double seconds) {
  return static_cast<int64_t>(std::llround(seconds * 1000.0));
}

bool rule_holds(const EndpointRule& rule, bool decoded_something, int64_t trailing_silence_ms,
                int64_t segment_ms) {
  return (decoded_something || !rule.must_decode_something) &&
         trailing_silence_ms >= milliseconds(rule.min_trailing_silence_s) &&
         segment_ms >= milliseconds(rule.min_segment_s);
}

}  // namespace

CtcEndpoint::CtcEndpoint(const EndpointConfig& config, double frame_shift_s)
    : config_(config), frame_shift_s_(frame_shift_s) {
  OASR_CHECK(std::isfinite(frame_shift_s) && milliseconds(frame_shift_s) > 0, kInvalidArgument,
             "CTC endpoint: the frame shift must be at least 1 ms, got ", frame_shift_s, " s");
  frame_shift_ms_ = milliseconds(frame_shift_s);
}

void CtcEndpoint::reset() {
  frames_ = 0;
  trailing_blank_frames_ = 0;
}

bool CtcEndpoint::accept(const Tensor& log_probs, bool decoded_something) {
  OASR_CHECK(
      log_probs.dim() == 2 && log_probs.dtype() == DType::kF32 && log_probs.device().is_cpu() &&
          config_.blank_id >= 0 && config_.blank_id < log_probs.size(1),
      kInvalidArgument, "CTC endpoint: log-probs must be host float32 [T, V] with the blank ",
      config_.blank_id, " inside V, got ", log_probs.str());
  const Tensor rows = log_probs.contiguous();
  const float* data = rows.data<float>();
  const int64_t vocab = rows.size(1);
  for (int64_t t = 0; t < rows.size(0); ++t) {
    const float blank_probability = std::exp(data[t * vocab + config_.blank_id]);
    ++frames_;
    trailing_blank_frames_ =
        blank_probability > config_.blank_threshold ? trailing_blank_frames_ + 1 : 0;
  }
  const int64_t segment = frames_ * frame_shift_ms_;
  const int64_t silence = trailing_blank_frames_ * frame_shift_ms_;
  return rule_holds(config_.rule1, decoded_something, silence, segment) ||
         rule_holds(config_.rule2, decoded_something, silence, segment) ||
         rule_holds(config_.rule3, decoded_something, silence, segment);
}

}  // namespace oasr::decode
