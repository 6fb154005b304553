#include "quant/calibration/observers.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quant/number_format.h"
#include "quant/numerics.h"

namespace oasr::quant {

void ChannelAbsMax::update(const float* x, int64_t rows, int64_t channels) {
  if (max_.empty()) max_.assign(static_cast<size_t>(channels), 0.0f);
  OASR_CHECK(static_cast<int64_t>(max_.size()) == channels, kInvalidArgument,
             "calibration: a layer's input changed from ", max_.size(), " to ", channels,
             " channels between calls");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const float magnitude = std::fabs(row[c]);
      // NaN compares false and is ignored; inf is kept and reported.
      if (magnitude > max_[static_cast<size_t>(c)]) max_[static_cast<size_t>(c)] = magnitude;
    }
  }
  rows_ += rows;
}

AbsHistogram::AbsHistogram(int64_t bins) : bins_(static_cast<size_t>(bins), 0.0) {
  OASR_CHECK(bins >= 2 && bins % 2 == 0, kInvalidArgument,
             "AbsHistogram: bins must be even and >= 2, got ", bins);
}

void AbsHistogram::update(const float* values, int64_t count) {
  float batch_max = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    const float magnitude = std::fabs(values[i]);
    if (std::isfinite(magnitude) && magnitude > batch_max) batch_max = magnitude;
  }
  if (batch_max > 0.0f && range_ == 0.0f) range_ = batch_max;
  // Doubling keeps every earlier bin boundary a boundary of the new bins.
  while (batch_max >= range_ && range_ > 0.0f && batch_max > 0.0f) {
    const size_t n = bins_.size();
    std::vector<double> merged(n, 0.0);
    for (size_t i = 0; i < n / 2; ++i) merged[i] = bins_[2 * i] + bins_[2 * i + 1];
    bins_ = std::move(merged);
    range_ *= 2.0f;
  }
  max_ = std::max(max_, batch_max);
  const auto n = static_cast<int64_t>(bins_.size());
  const double per_bin = range_ > 0.0f ? static_cast<double>(n) / range_ : 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const float magnitude = std::fabs(values[i]);
    if (!std::isfinite(magnitude)) continue;
    const auto bin = std::min<int64_t>(static_cast<int64_t>(magnitude * per_bin), n - 1);
    bins_[static_cast<size_t>(bin)] += 1.0;
    ++count_;
  }
}

float format_max(QDType format) {
  return number_format(format).max_value;
}

float fake_quantize(float value, float clip, QDType format) {
  const NumberFormat& row = number_format(format);
  const float scale = row.scale_of_amax(clip);
  const float scaled = act::detail::mul_rn(value, static_multiplier(scale, 1.0f));
  return act::detail::mul_rn(row.round_to_grid(scaled), scale);
}

double AbsHistogram::expected_error(float clip, QDType format) const {
  // The values of a bin are taken as spread evenly across it and sampled at
  // kPointsPerBin places: a quantization step spans only a few bins, so one
  // representative value per bin would misjudge the rounding error.
  constexpr int kPointsPerBin = 8;
  const auto n = static_cast<int64_t>(bins_.size());
  const double width = static_cast<double>(range_) / static_cast<double>(n);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double weight = bins_[static_cast<size_t>(i)];
    if (weight == 0.0) continue;
    double bin_error = 0.0;
    for (int p = 0; p < kPointsPerBin; ++p) {
      const auto value =
          static_cast<float>((static_cast<double>(i) + (p + 0.5) / kPointsPerBin) * width);
      const double error = static_cast<double>(value) - fake_quantize(value, clip, format);
      bin_error += error * error;
    }
    total += weight * bin_error / kPointsPerBin;
  }
  return total;
}

const std::vector<std::string>& static_observer_names() {
  static const std::vector<std::string> names = {"mse", "minmax"};
  return names;
}

void check_static_observer(const std::string& name) {
  const auto& names = static_observer_names();
  OASR_CHECK(std::find(names.begin(), names.end(), name) != names.end(), kInvalidArgument,
             "unknown static-input observer '", name,
             "'; use mse (the clip minimising the expected quantization error) or minmax (the "
             "calibration maximum)");
}

float AbsHistogram::choose_clip(const std::string& observer, QDType format) const {
  check_static_observer(observer);
  OASR_CHECK(count_ > 0, kInvalidArgument,
             "a static input scale needs calibration data, but this layer saw none");
  // An all-zero input still needs a finite positive scale.
  if (max_ <= 0.0f) return kAmaxFloor;
  if (observer == "minmax") return max_;
  float best_clip = max_;
  double best_error = expected_error(max_, format);
  for (int i = 16; i < 256; ++i) {
    const float clip = max_ * static_cast<float>(i) / 256.0f;
    const double error = expected_error(clip, format);
    if (error < best_error) {
      best_error = error;
      best_clip = clip;
    }
  }
  return best_clip;
}

void CalibrationRecorder::track_histogram(const std::string& path, std::vector<float> multiplier) {
  std::lock_guard<std::mutex> lock(mutex_);
  tracked_[path] = std::move(multiplier);
}

void CalibrationRecorder::observe(const std::string& path, LayerKind kind, const Tensor& x) {
  // Channels last: a Conv2d / Conv1d input [B, C, ...] is moved to [B, ..., C].
  Tensor host = x.to(Device::cpu()).to(DType::kF32);
  if (is_convolution(kind)) {
    OASR_CHECK(host.dim() >= 3, kInvalidArgument, "calibration: convolution '", path,
               "' got input ", shape_str(host.shape()));
    for (int64_t d = 1; d + 1 < host.dim(); ++d) host = host.transpose(d, d + 1);
  }
  host = host.contiguous();
  const int64_t channels = host.dim() == 0 ? 1 : host.size(-1);
  const int64_t rows = channels == 0 ? 0 : host.numel() / channels;
  std::lock_guard<std::mutex> lock(mutex_);
  LayerObservation& observation = layers_[path];
  observation.kind = kind;
  ++observation.calls;
  if (rows == 0) return;
  observation.channels.update(host.data<float>(), rows, channels);
  const auto tracked = tracked_.find(path);
  if (tracked == tracked_.end()) return;
  if (!observation.histogram) {
    observation.histogram.emplace();
    observation.histogram_multiplier = tracked->second;
  }
  const std::vector<float>& multiplier = tracked->second;
  if (multiplier.empty()) {
    observation.histogram->update(host.data<float>(), host.numel());
    return;
  }
  OASR_CHECK(static_cast<int64_t>(multiplier.size()) == channels, kInternal, "calibration: '", path,
             "' has ", channels, " input channels but a smoother of ", multiplier.size());
  std::vector<float> smoothed(static_cast<size_t>(host.numel()));
  const float* src = host.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) {
      const size_t i = static_cast<size_t>(r * channels + c);
      smoothed[i] = act::detail::mul_rn(src[i], multiplier[static_cast<size_t>(c)]);
    }
  }
  observation.histogram->update(smoothed.data(), host.numel());
}

const LayerObservation* CalibrationRecorder::find(const std::string& path) const {
  const auto it = layers_.find(path);
  return it == layers_.end() ? nullptr : &it->second;
}

void CalibrationRecorder::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  layers_.clear();
  tracked_.clear();
}

}  // namespace oasr::quant
