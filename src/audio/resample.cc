#include "audio/resample.h"

#include <soxr.h>

#include <algorithm>

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

namespace {
// The one recipe both resample() and StreamResampler use.
struct SoxrSpecs {
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, SOXR_LINEAR_PHASE);
  soxr_runtime_spec_t runtime = soxr_runtime_spec(1);  // the caller owns parallelism
};
}  // namespace

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

  const SoxrSpecs specs;
  size_t consumed = 0;
  size_t produced = 0;
  const soxr_error_t error =
      soxr_oneshot(from_rate, to_rate, 1, samples.data(), samples.size(), &consumed, out.data(),
                   out.size(), &produced, &specs.io, &specs.quality, &specs.runtime);
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

StreamResampler::StreamResampler(int from_rate, int to_rate)
    : from_rate_(from_rate), to_rate_(to_rate) {
  resampled_length(0, from_rate, to_rate);  // refuses non-positive rates
  const SoxrSpecs specs;
  soxr_error_t error = nullptr;
  soxr_ = soxr_create(from_rate, to_rate, 1, &error, &specs.io, &specs.quality, &specs.runtime);
  OASR_CHECK(error == nullptr && soxr_ != nullptr, kInternal, "resample ", from_rate, " Hz -> ",
             to_rate, " Hz: libsoxr could not start: ", error ? error : "no resampler");
}

StreamResampler::~StreamResampler() {
  soxr_delete(static_cast<soxr_t>(soxr_));
}

std::vector<float> StreamResampler::run(const float* samples, size_t count, bool flush) {
  std::vector<float> out;
  // The output a piece can complete, plus the filter's latency on a flush.
  const size_t room =
      static_cast<size_t>(resampled_length(static_cast<int64_t>(count), from_rate_, to_rate_)) +
      (flush ? static_cast<size_t>(to_rate_ / 10) : 0) + 64;
  std::vector<float> buffer(room);
  size_t at = 0;
  for (;;) {
    size_t used = 0;
    size_t made = 0;
    // soxr stops when the output is full: loop until it has taken every
    // input sample (and, flushing, until it gives no more).
    const soxr_error_t error =
        soxr_process(static_cast<soxr_t>(soxr_), flush ? nullptr : samples + at, count - at, &used,
                     buffer.data(), buffer.size(), &made);
    OASR_CHECK(error == nullptr, kInternal, "resample ", from_rate_, " Hz -> ", to_rate_,
               " Hz failed inside libsoxr: ", error);
    at += used;
    out.insert(out.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(made));
    if (flush ? made == 0 : (at == count && made < buffer.size())) break;
  }
  consumed_ += static_cast<int64_t>(count);
  produced_ += static_cast<int64_t>(out.size());
  return out;
}

std::vector<float> StreamResampler::process(std::span<const float> samples) {
  OASR_CHECK(!finished_, kInvalidArgument, "the resampled stream has ended");
  if (samples.empty()) return {};
  return run(samples.data(), samples.size(), false);
}

std::vector<float> StreamResampler::finish() {
  OASR_CHECK(!finished_, kInvalidArgument, "the resampled stream has ended");
  finished_ = true;
  const int64_t before = produced_;
  std::vector<float> tail = run(nullptr, 0, true);
  // As resample(): exactly round(N * ratio) samples in all, the flush's
  // extra sample dropped and a short one padded with the filter's silence.
  const int64_t wanted = resampled_length(consumed_, from_rate_, to_rate_) - before;
  tail.resize(static_cast<size_t>(std::max<int64_t>(wanted, 0)), 0.0f);
  produced_ = before + static_cast<int64_t>(tail.size());
  return tail;
}

}  // namespace oasr::audio
