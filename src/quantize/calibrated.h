// The calibration algorithms, registered by name (spec "Calibration"):
//   rtn                 round-to-nearest per-channel weights (the last step of
//                       every recipe; needs no calibration);
//   smoothquant         per-channel smoothing folded per the model's layout
//                       (quantize/smoothquant.h);
//   static_inputs       a calibrated per-tensor input scale on each GEMM-chain
//                       consumer, measured on the input it will see (after
//                       its runtime smoother);
//   static_conv_inputs  the same for each selected convolution.
// and the step that writes their results into a model's quantized slots.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "layers/module.h"
#include "quant/calibration/observers.h"
#include "quant/spec.h"

namespace oasr::quant {

struct QuantAlgorithmInfo {
  std::string name;
  bool needs_calibration = false;
  std::string description;
};
void register_quant_algorithm(QuantAlgorithmInfo info);
const std::vector<QuantAlgorithmInfo>& quant_algorithms();  // rtn, smoothquant, static_inputs, ...
const QuantAlgorithmInfo& quant_algorithm(const std::string& name);  // kInvalidArgument if unknown

struct StaticInputScale {
  float input_scale = 0.0f;  // clip / Q
  float clip = 0.0f;
  float observed_max = 0.0f;  // of |x * smooth_inv| over the calibration inputs
  std::string observer;
  int64_t values = 0;
};

// The static scale of `path` from the recorder's histogram of its input.
StaticInputScale choose_static_input_scale(const CalibrationRecorder& recorder,
                                           const std::string& path, const std::string& observer,
                                           QDType format);

struct CalibratedTensors {
  // s per runtime-smoothed layer: its weight is quantized as W * s and it
  // stores smooth_inv = 1 / s.
  std::map<std::string, std::vector<float>> runtime_scale;
  std::map<std::string, std::vector<float>> smooth_inv;
  std::map<std::string, StaticInputScale> static_inputs;  // per static-scheme layer
};

// Quantizes every layer of `spec` in `model` (float32 master on the host):
// the per-channel weight quantization of the full-precision weight (times s
// where runtime-smoothed), then smooth_inv and input_scale. Refuses a
// runtime-smoothed or static layer whose calibrated tensor is missing.
void quantize_model_calibrated(Module& model, const QuantizationSpec& spec,
                               const CalibratedTensors& tensors);

}  // namespace oasr::quant
