#include "audio/resample.h"

#include <soxr.h>

#include "core/error.h"

namespace oasr::audio {

int64_t resampled_length(int64_t num_samples, int from_rate, int to_rate) {
  OASR_CHECK(from_rate > 0 && to_rate > 0, kInvalidArgument,
             "resample: sample rates must be positive, got from_rate=", from_rate,
             " to_rate=", to_rate);
  // Integer arithmetic: round(N * to / from) without a float rounding step.
  const __int128 scaled = static_cast<__int128>(num_samples) * to_rate;
  return static_cast<int64_t>((2 * scaled + from_rate) / (2 * static_cast<__int128>(from_rate)));
}

std::vector<float> resample(std::span<const float> samples, int from_rate, int to_rate) {
  const int64_t out_length =
      resampled_length(static_cast<int64_t>(samples.size()), from_rate, to_rate);
  if (from_rate == to_rate) return {samples.begin(), samples.end()};
  if (samples.empty() || out_length == 0) return {};
  // Room for a few samples more than the target: soxr stops consuming input
  // once the output buffer is full, and may deliver a sample beyond
  // round(N * ratio) at the end of its flush.
  constexpr size_t kSlack = 16;
  std::vector<float> out(static_cast<size_t>(out_length) + kSlack, 0.0f);

  const soxr_io_spec_t io_spec = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, SOXR_LINEAR_PHASE);
  const soxr_runtime_spec_t runtime = soxr_runtime_spec(1);  // the caller owns parallelism
  size_t consumed = 0;
  size_t produced = 0;
  const soxr_error_t error =
      soxr_oneshot(from_rate, to_rate, 1, samples.data(), samples.size(), &consumed, out.data(),
                   out.size(), &produced, &io_spec, &quality, &runtime);
  OASR_CHECK(error == nullptr, kInternal, "resample ", from_rate, " Hz -> ", to_rate,
             " Hz failed inside libsoxr: ", error);
  OASR_CHECK(consumed == samples.size(), kInternal, "resample ", from_rate, " Hz -> ", to_rate,
             " Hz: libsoxr consumed ", consumed, " of ", samples.size(), " samples");
  // soxr's one-shot flush delivers round(N * ratio) samples (checked over
  // many lengths and ratios in test_audio_resample.cc); should a build ever
  // fall a sample or two short, the tail stays zero (the filter's own decay)
  // rather than the length changing under the caller.
  OASR_CHECK(produced + 2 >= static_cast<size_t>(out_length), kInternal, "resample ", from_rate,
             " Hz -> ", to_rate, " Hz: libsoxr produced ", produced, " of ", out_length,
             " samples");
  out.resize(static_cast<size_t>(out_length));
  return out;
}

}  // namespace oasr::audio
