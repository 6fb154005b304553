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

// resample() over audio that arrives in pieces (a stream): the same soxr
// recipe, fed piece by piece; finish() flushes the filter and trims or pads
// the whole output to resampled_length(total input) samples, so the pieces
// put together equal resample() of the whole input (tested bit for bit in
// test_audio_resample.cc).
class StreamResampler {
 public:
  StreamResampler(int from_rate, int to_rate);
  ~StreamResampler();
  StreamResampler(const StreamResampler&) = delete;
  StreamResampler& operator=(const StreamResampler&) = delete;

  // The output samples this piece completes (possibly none).
  std::vector<float> process(std::span<const float> samples);
  // The rest of the output; process() is refused afterwards.
  std::vector<float> finish();

 private:
  std::vector<float> run(const float* samples, size_t count, bool flush);

  int from_rate_;
  int to_rate_;
  void* soxr_ = nullptr;  // soxr_t
  int64_t consumed_ = 0;
  int64_t produced_ = 0;
  bool finished_ = false;
};

}  // namespace oasr::audio
