#include "audio/silence.h"

#include <cmath>
#include <limits>

namespace oasr::audio {

double deviation_rms_dbfs(std::span<const float> samples) {
  if (samples.empty()) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (const float s : samples) sum += s;
  const double mean = sum / static_cast<double>(samples.size());
  double squares = 0.0;
  for (const float s : samples) {
    const double d = static_cast<double>(s) - mean;
    squares += d * d;
  }
  const double rms = std::sqrt(squares / static_cast<double>(samples.size()));
  return rms > 0.0 ? 20.0 * std::log10(rms) : -std::numeric_limits<double>::infinity();
}

}  // namespace oasr::audio
