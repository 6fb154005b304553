// SmoothQuant (spec "SmoothQuant"): for GEMMs sharing an input X, a
// per-channel s rewrites X W^T as (X / s)(W s)^T, with
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)
// where max|W_j| is taken over every consumer's column j. The model's layout
// says where X / s is absorbed (quant/layout.h SmoothFold); the folds are
// applied to the full-precision master in place, so the master still
// computes the same function up to rounding. Runtime-smoothed consumers keep
// their weight unfolded here: they take W * s when quantized and store
// smooth_inv = 1 / s (apply_smoothing_to_weight / runtime_smoothing).
//
// Clamping keeps every folded parameter inside fp16 (|value| <= 65504): s_j
// is at most limit / max|W_j| (the consumers' columns grow by s) and at least
// max|P_j| / limit (the producer's row or affine entry shrinks by s). A channel
// calibration never saw active (max|X_j| == 0) keeps s = 1, so audio unlike
// the calibration set cannot make it dominate its token's scale.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "layers/module.h"
#include "quant/calibration/observers.h"
#include "quant/layout.h"

namespace oasr::quant {

inline constexpr float kFp16Max = 65504.0f;
inline constexpr float kMinSmoothing = 1e-5f;
inline constexpr float kMaxSmoothing = 1e5f;

struct SmoothingScales {
  std::vector<float> s;
  int64_t inactive = 0;  // channels kept at s = 1 (never active, or an all-zero column)
  int64_t clamped = 0;   // channels moved by the fp16 / range clamp
};

// The scale of one group. act_absmax: max|X_j| from calibration;
// weight_absmax: max over the consumers of |W[:, j]|; producer_absmax: the
// largest |value| the fold divides by s_j (empty for a runtime fold).
SmoothingScales smoothing_scales(const std::vector<float>& act_absmax,
                                 const std::vector<float>& weight_absmax, double alpha,
                                 const std::vector<float>& producer_absmax = {},
                                 float limit = kFp16Max);

struct SmoothQuantResult {
  // smooth_inv (= 1 / s) of each runtime-smoothed consumer, by module path.
  std::map<std::string, std::vector<float>> smooth_inv;
  // s of each runtime-smoothed consumer (its weight takes W * s when quantized).
  std::map<std::string, std::vector<float>> runtime_scale;
  // Parameters the folds changed ("encoder.encoders.0.norm_mha.weight", ...):
  // the written checkpoint takes these from the master, not from the source.
  std::set<std::string> rewritten;
  nlohmann::ordered_json report = nlohmann::ordered_json::array();  // one entry per group
};

// Applies every group of `layout` that has at least one consumer in
// `quantized` (module paths of the layers that will be quantized), in layout
// order, computing each s from the master's current weights and the
// recorder's per-channel maxima. The master must be float32 on the host.
SmoothQuantResult apply_smoothquant(Module& master, const QuantLayout& layout,
                                    const CalibrationRecorder& recorder, double alpha,
                                    const std::set<std::string>& quantized);

// The consumer's [N, K] weight with column j multiplied by s_j (float32, host).
Tensor scale_weight_columns(const Tensor& weight_nk, const std::vector<float>& s);

}  // namespace oasr::quant
