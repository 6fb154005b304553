// Silence by the signal alone: an utterance whose samples, less their mean,
// have an RMS below kSilenceDbfs (-80 dBFS: under half an int16 step of
// noise) holds no speech, whatever a model would say of it. Digital silence,
// a DC offset and 1-LSB dither all fall below it; any recorded room noise is
// far above it (-60 dBFS and up).
#pragma once

#include <span>

namespace oasr::audio {

inline constexpr double kSilenceDbfs = -80.0;

// 20 log10(RMS of x - mean(x)) relative to full scale 1.0; -inf for a
// constant (or empty) signal.
double deviation_rms_dbfs(std::span<const float> samples);

inline bool is_silent(std::span<const float> samples) {
  return deviation_rms_dbfs(samples) < kSilenceDbfs;
}

}  // namespace oasr::audio
