// Sample-rate conversion of mono float32 audio with libsoxr.
//
// Quality: soxr's "HQ" recipe (SOXR_HQ: 20-bit precision, i.e. about 120 dB
// of stopband rejection, linear phase, flat (<= 0.01 dB) to 91.3% of the lower
// Nyquist frequency, alias-free from the Nyquist frequency on). 20 bits is
// beyond the 16-bit audio ASR sees, and VHQ (28 bits) costs more time for no
// audible or recognisable difference. Linear phase keeps features aligned in
// time with the original: soxr removes the filter delay, so output sample k
// sits at time k / to_rate like input sample j at j / from_rate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace oasr::audio {

// Output length is round(N * to_rate / from_rate) (half rounds up); equal
// rates return a copy. Refuses non-positive rates (kInvalidArgument).
std::vector<float> resample(std::span<const float> samples, int from_rate, int to_rate);

// The length resample() returns for `num_samples` input samples.
int64_t resampled_length(int64_t num_samples, int from_rate, int to_rate);

}  // namespace oasr::audio
