// Endpoint detection on CTC posteriors, as the WeNet runtime does it
// (Kaldi's online endpoint rules over blank frames): a frame whose blank
// probability exceeds `blank_threshold` counts as silence, and an endpoint is
// reached when any rule holds:
//   rule 1: >= 5 s of trailing silence, even when nothing has been decoded;
//   rule 2: >= 1 s of trailing silence after something was decoded;
//   rule 3: the segment is >= 20 s long, whatever else.
// The rules are checked after each chunk of frames, as WeNet checks them after
// each decoded chunk. A streaming session that ends its segment there and
// decodes on from a fresh state serves a stream of any length in bounded
// memory (models/u2pp/u2pp_recognizer.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::decode {

struct EndpointRule {
  bool must_decode_something = false;
  double min_trailing_silence_s = 0.0;
  double min_segment_s = 0.0;
};

struct EndpointConfig {
  int64_t blank_id = 0;
  float blank_threshold = 0.8f;  // exp(log P(blank)) above this: a silent frame
  EndpointRule rule1{false, 5.0, 0.0};
  EndpointRule rule2{true, 1.0, 0.0};
  EndpointRule rule3{false, 0.0, 20.0};
};

class CtcEndpoint {
 public:
  // frame_shift_s: seconds per log-prob frame (an encoder frame: the
  // subsampling rate x the fbank shift, 0.04 s for U2++); durations are
  // compared in whole milliseconds, as WeNet's runtime does.
  CtcEndpoint(const EndpointConfig& config, double frame_shift_s);

  // Counts the frames of `log_probs` (host float32 [T, V]) and says whether
  // an endpoint is reached after them; `decoded_something`: the segment's
  // best path so far holds a token.
  bool accept(const Tensor& log_probs, bool decoded_something);
  void reset();

  double segment_seconds() const { return static_cast<double>(frames_) * frame_shift_s_; }
  double trailing_silence_seconds() const {
    return static_cast<double>(trailing_blank_frames_) * frame_shift_s_;
  }

 private:
  EndpointConfig config_;
  double frame_shift_s_;
  int64_t frame_shift_ms_;
  int64_t frames_ = 0;
  int64_t trailing_blank_frames_ = 0;
};

}  // namespace oasr::decode
