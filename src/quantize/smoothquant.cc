#include "quantize/smoothquant.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/quantizable.h"
#include "quantize/apply.h"

namespace oasr::quant {
namespace {

Module& module_at(const std::map<std::string, Module*>& modules, const std::string& path) {
  const auto it = modules.find(path);
  if (it != modules.end()) return *it->second;
  OASR_THROW(kInternal, "smoothquant: the layout names '", path,
             "', which the model does not have");
}

Tensor host_f32(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::kF32).contiguous().clone();
}

// The GEMM weight of a consumer as [N, K] (a pointwise conv's [N, K, 1] viewed).
Tensor consumer_weight(const Module& module) {
  const Tensor& w = module.param("weight");
  OASR_CHECK(w.dim() >= 2, kInternal, "smoothquant: '", module.path(), "' has weight ",
             shape_str(w.shape()), ", not a GEMM weight");
  return host_f32(w).view({w.size(0), -1});
}

void set_weight(Module& module, const Tensor& weight_nk) {
  const Shape shape = module.param("weight").shape();
  module.set_param("weight", weight_nk.view(shape).to(module.param("weight").dtype()));
}

std::vector<float> column_absmax(const Tensor& weight_nk) {
  const int64_t n = weight_nk.size(0);
  const int64_t k = weight_nk.size(1);
  std::vector<float> out(static_cast<size_t>(k), 0.0f);
  const float* w = weight_nk.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      out[static_cast<size_t>(c)] = std::max(out[static_cast<size_t>(c)], std::fabs(w[r * k + c]));
    }
  }
  return out;
}

// The largest |value| in each output row of a producer GEMM (weight and bias).
std::vector<float> row_absmax(const Module& producer) {
  const Tensor w = consumer_weight(producer);
  const int64_t n = w.size(0);
  const int64_t k = w.size(1);
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      out[static_cast<size_t>(r)] =
          std::max(out[static_cast<size_t>(r)], std::fabs(w.data<float>()[r * k + c]));
    }
  }
  if (producer.has_parameter("bias") && producer.slot("bias").value.defined()) {
    const Tensor b = host_f32(producer.param("bias"));
    for (int64_t r = 0; r < n; ++r) {
      out[static_cast<size_t>(r)] =
          std::max(out[static_cast<size_t>(r)], std::fabs(b.data<float>()[r]));
    }
  }
  return out;
}

std::vector<float> affine_absmax(const Module& norm) {
  const Tensor gamma = host_f32(norm.param("weight"));
  std::vector<float> out(gamma.data<float>(), gamma.data<float>() + gamma.numel());
  if (norm.has_parameter("bias") && norm.slot("bias").value.defined()) {
    const Tensor beta = host_f32(norm.param("bias"));
    for (size_t j = 0; j < out.size(); ++j) {
      out[j] = std::max(std::fabs(out[j]), std::fabs(beta.data<float>()[j]));
    }
  }
  for (float& v : out) v = std::fabs(v);
  return out;
}

// p[j] / s[j] for a vector parameter.
void divide_vector(Module& module, const std::string& name, const std::vector<float>& s,
                   std::set<std::string>& rewritten) {
  if (!module.has_parameter(name) || !module.slot(name).value.defined()) return;
  Tensor v = host_f32(module.param(name));
  OASR_CHECK(v.numel() == static_cast<int64_t>(s.size()), kInternal, "smoothquant: '",
             module.path(), ".", name, "' has ", v.numel(), " entries for ", s.size(),
             " smoothing channels");
  float* data = v.data<float>();
  for (size_t j = 0; j < s.size(); ++j) data[j] = data[j] / s[j];
  module.set_param(name, v.to(module.param(name).dtype()));
  rewritten.insert(module.path() + "." + name);
}

void divide_rows(Module& producer, const std::vector<float>& s, std::set<std::string>& rewritten) {
  Tensor w = consumer_weight(producer);
  const int64_t n = w.size(0);
  const int64_t k = w.size(1);
  OASR_CHECK(n == static_cast<int64_t>(s.size()), kInternal, "smoothquant: producer '",
             producer.path(), "' has ", n, " output rows for ", s.size(), " smoothing channels");
  float* data = w.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) data[r * k + c] = data[r * k + c] / s[static_cast<size_t>(r)];
  }
  set_weight(producer, w);
  rewritten.insert(producer.path() + ".weight");
  divide_vector(producer, "bias", s, rewritten);
}

nlohmann::ordered_json summarize(const std::vector<float>& values) {
  if (values.empty()) return nullptr;
  double log_sum = 0.0;
  for (float v : values) log_sum += std::log(static_cast<double>(v));
  return {{"min", *std::min_element(values.begin(), values.end())},
          {"max", *std::max_element(values.begin(), values.end())},
          {"geomean", std::exp(log_sum / static_cast<double>(values.size()))}};
}

}  // namespace

SmoothingScales smoothing_scales(const std::vector<float>& act_absmax,
                                 const std::vector<float>& weight_absmax, double alpha,
                                 const std::vector<float>& producer_absmax, float limit) {
  OASR_CHECK(alpha >= 0.0 && alpha <= 1.0, kInvalidArgument,
             "SmoothQuant alpha must be in [0, 1], got ", alpha);
  OASR_CHECK(act_absmax.size() == weight_absmax.size() &&
                 (producer_absmax.empty() || producer_absmax.size() == act_absmax.size()),
             kInternal, "smoothing_scales: ", act_absmax.size(), " activation channels, ",
             weight_absmax.size(), " weight columns, ", producer_absmax.size(),
             " producer channels");
  SmoothingScales out;
  out.s.assign(act_absmax.size(), 1.0f);
  for (size_t j = 0; j < act_absmax.size(); ++j) {
    const double a = act_absmax[j];
    const double w = weight_absmax[j];
    if (!(a > 0.0) || !(w > 0.0) || !std::isfinite(a) || !std::isfinite(w)) {
      ++out.inactive;
      continue;
    }
    const double raw = std::pow(a, alpha) / std::pow(w, 1.0 - alpha);
    double lo = kMinSmoothing;
    double hi = std::min<double>(kMaxSmoothing, limit / w);
    if (!producer_absmax.empty()) lo = std::max<double>(lo, producer_absmax[j] / limit);
    double s = raw;
    if (lo <= hi) {
      s = std::clamp(raw, lo, hi);
    } else {
      s = 1.0;  // no s keeps both sides inside fp16: leave the channel alone
    }
    if (s != raw) ++out.clamped;
    out.s[j] = static_cast<float>(s);
  }
  return out;
}

Tensor scale_weight_columns(const Tensor& weight_nk, const std::vector<float>& s) {
  Tensor w = host_f32(weight_nk);
  const int64_t n = w.size(0);
  const int64_t k = w.size(1);
  OASR_CHECK(k == static_cast<int64_t>(s.size()), kInternal, "scale_weight_columns: ", k,
             " columns for ", s.size(), " scales");
  float* data = w.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) data[r * k + c] = data[r * k + c] * s[static_cast<size_t>(c)];
  }
  return w;
}

SmoothQuantResult apply_smoothquant(Module& master, const QuantLayout& layout,
                                    const CalibrationRecorder& recorder, double alpha,
                                    const std::set<std::string>& quantized) {
  OASR_CHECK(layout.declares_smoothing(), kUnsupported, "SmoothQuant: the ",
             layout.architecture.empty() ? std::string("model") : layout.architecture,
             " declares no smoothing layout (quantization_layout()), so it cannot be smoothed; "
             "use a round-to-nearest recipe (int8_w8a8_rtn / fp8_w8a8_rtn)");
  SmoothQuantResult result;
  const auto modules = modules_by_path(master);
  for (const SmoothGroup& group : layout.smooth_groups) {
    std::vector<std::string> selected;
    for (const std::string& path : group.consumers) {
      if (quantized.count(path) > 0) selected.push_back(path);
    }
    if (selected.empty()) continue;
    // A runtime fold only reaches the layers that apply smooth_inv: the
    // quantized ones. The other folds act on X itself, so every consumer
    // takes W * s (full-precision ones included) to keep the function.
    const std::vector<std::string>& scaled =
        group.fold == SmoothFold::kRuntime ? selected : group.consumers;

    const LayerObservation* observation = recorder.find(selected.front());
    OASR_CHECK(observation != nullptr && observation->channels.rows() > 0, kInvalidArgument,
               "SmoothQuant: '", selected.front(),
               "' saw no calibration input; the calibration run never reached it (check that "
               "the manifest's audio decodes through this layer)");
    std::vector<float> act = observation->channels.values();
    for (size_t i = 1; i < selected.size(); ++i) {
      if (const LayerObservation* other = recorder.find(selected[i]); other != nullptr) {
        const auto& values = other->channels.values();
        for (size_t j = 0; j < act.size() && j < values.size(); ++j) {
          act[j] = std::max(act[j], values[j]);
        }
      }
    }
    std::vector<float> weight_max(act.size(), 0.0f);
    for (const std::string& path : scaled) {
      const std::vector<float> columns = column_absmax(consumer_weight(module_at(modules, path)));
      OASR_CHECK(columns.size() == act.size(), kInternal, "SmoothQuant: '", path, "' has ",
                 columns.size(), " input channels; its group's input has ", act.size());
      for (size_t j = 0; j < act.size(); ++j) weight_max[j] = std::max(weight_max[j], columns[j]);
    }
    std::vector<float> producer_max;
    Module* producer = nullptr;
    if (group.fold != SmoothFold::kRuntime) {
      producer = &module_at(modules, group.producer);
      producer_max =
          group.fold == SmoothFold::kNormAffine ? affine_absmax(*producer) : row_absmax(*producer);
    }
    const SmoothingScales scales = smoothing_scales(act, weight_max, alpha, producer_max);

    switch (group.fold) {
      case SmoothFold::kNormAffine:
        divide_vector(*producer, "weight", scales.s, result.rewritten);
        divide_vector(*producer, "bias", scales.s, result.rewritten);
        break;
      case SmoothFold::kVToO:
      case SmoothFold::kProducerRows:
        divide_rows(*producer, scales.s, result.rewritten);
        break;
      case SmoothFold::kRuntime:
        break;
    }
    for (const std::string& path : scaled) {
      Module& consumer = module_at(modules, path);
      if (group.fold == SmoothFold::kRuntime) {
        std::vector<float> inverse(scales.s.size());
        for (size_t j = 0; j < inverse.size(); ++j) inverse[j] = 1.0f / scales.s[j];
        result.smooth_inv[path] = std::move(inverse);
        result.runtime_scale[path] = scales.s;
      } else {
        set_weight(consumer, scale_weight_columns(consumer_weight(consumer), scales.s));
        result.rewritten.insert(path + ".weight");
      }
    }
    nlohmann::ordered_json entry;
    entry["fold"] = std::string(to_string(group.fold));
    entry["producer"] = group.producer.empty() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(group.producer);
    entry["consumers"] = scaled;
    entry["alpha"] = alpha;
    entry["channels"] = scales.s.size();
    entry["inactive_channels"] = scales.inactive;
    entry["clamped_channels"] = scales.clamped;
    entry["s"] = summarize(scales.s);
    entry["activation_absmax"] = summarize(act);
    entry["weight_absmax"] = summarize(weight_max);
    result.report.push_back(std::move(entry));
  }
  return result;
}

}  // namespace oasr::quant
