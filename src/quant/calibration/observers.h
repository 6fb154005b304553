// Calibration observers (spec "Calibration"): statistics of the inputs a
// quantizable layer sees while the full-precision model decodes the
// calibration audio.
//   ChannelAbsMax   per input channel max |x| (SmoothQuant's max|X_j|);
//   AbsHistogram    the distribution of |x| over every element, from which a
//                   static per-tensor input scale is chosen: "minmax" takes
//                   the observed maximum, "mse" the clip minimising the
//                   expected squared quantization error.
//   CalibrationRecorder  the InputObserver attached to the layers; keeps one
//                   of each per module path.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "quant/calibration/input_observer.h"
#include "quant/format.h"

namespace oasr::quant {

class ChannelAbsMax {
 public:
  // rows x channels values, channels contiguous.
  void update(const float* x, int64_t rows, int64_t channels);
  const std::vector<float>& values() const { return max_; }
  int64_t rows() const { return rows_; }

 private:
  std::vector<float> max_;
  int64_t rows_ = 0;
};

// A histogram of |v| over [0, range) in a fixed number of bins; when a value
// beyond the range arrives the range doubles and neighbouring bins merge, so
// every value ever seen is counted and the exact maximum is kept beside it.
class AbsHistogram {
 public:
  explicit AbsHistogram(int64_t bins = 2048);
  void update(const float* values, int64_t count);
  float max() const { return max_; }
  int64_t count() const { return count_; }
  float range() const { return range_; }
  const std::vector<double>& bins() const { return bins_; }

  // The expected squared error of quantizing the observed values with clip c
  // (scale c / Q), each bin represented by its centre.
  double expected_error(float clip, QDType format) const;
  // The clip of the static scale (input_scale = clip / Q):
  //   "minmax": the maximum seen;
  //   "mse":    argmin over c = max * i / 256, i = 16..256, of expected_error.
  float choose_clip(const std::string& observer, QDType format) const;

 private:
  std::vector<double> bins_;
  float range_ = 0.0f;  // 0 until the first non-zero value
  float max_ = 0.0f;
  int64_t count_ = 0;
};

// The observer names static_inputs.observer / static_conv_inputs.observer accept.
const std::vector<std::string>& static_observer_names();  // mse, minmax
void check_static_observer(const std::string& name);      // kInvalidArgument listing the names

// Q of the format (its traits row's max_value: 127 int8, 448 e4m3).
float format_max(QDType format);
// Quantize-dequantize of one value under the format's static scale of
// `clip` (its scale rule), exactly as the served quantize rounds (int8 rne +
// clamp; e4m3 rne + saturate).
float fake_quantize(float value, float clip, QDType format);

struct LayerObservation {
  LayerKind kind = LayerKind::kLinear;
  ChannelAbsMax channels;  // per input channel
  std::optional<AbsHistogram> histogram;
  std::vector<float> histogram_multiplier;  // per channel (smooth_inv); empty = 1
  int64_t calls = 0;
};

class CalibrationRecorder : public InputObserver {
 public:
  // Every observed layer gets its per-channel abs-max. A tracked layer also
  // gets a histogram of |x * multiplier| (multiplier per input channel, the
  // runtime smoother the layer will apply; empty for none).
  void track_histogram(const std::string& path, std::vector<float> multiplier = {});
  void observe(const std::string& path, LayerKind kind, const Tensor& x) override;

  const LayerObservation* find(const std::string& path) const;
  const std::map<std::string, LayerObservation>& layers() const { return layers_; }
  void clear();

 private:
  std::mutex mutex_;
  std::map<std::string, LayerObservation> layers_;
  std::map<std::string, std::vector<float>> tracked_;
};

}  // namespace oasr::quant
