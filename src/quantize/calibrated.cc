#include "quantize/calibrated.h"

#include "core/error.h"
#include "layers/quantizable.h"
#include "quant/methods/quant_method.h"
#include "quant/number_format.h"
#include "quant/numerics.h"
#include "quantize/apply.h"
#include "quantize/smoothquant.h"

namespace oasr::quant {
namespace {

// quant_algorithm() hands out references, so a registration must never move
// the entries: the storage is reserved once and a registration past it is
// refused rather than reallocating.
constexpr size_t kAlgorithmCapacity = 64;

std::vector<QuantAlgorithmInfo>& algorithm_registry() {
  static std::vector<QuantAlgorithmInfo> registry = [] {
    std::vector<QuantAlgorithmInfo> builtins = {
        {"rtn", false, "round-to-nearest per-output-channel weights on the host in fp32"},
        {"smoothquant", true,
         "per-channel smoothing s_j = max|X_j|^alpha / max|W_j|^(1-alpha), folded per the "
         "model's quantization layout"},
        {"static_inputs", true,
         "a calibrated per-tensor input scale on each GEMM-chain consumer (observer mse or "
         "minmax), measured after its runtime smoother"},
        {"static_conv_inputs", true,
         "a calibrated per-tensor input scale on each selected convolution (observer mse or "
         "minmax)"},
    };
    builtins.reserve(kAlgorithmCapacity);
    return builtins;
  }();
  return registry;
}

}  // namespace

void register_quant_algorithm(QuantAlgorithmInfo info) {
  for (const QuantAlgorithmInfo& existing : algorithm_registry()) {
    OASR_CHECK(existing.name != info.name, kInvalidArgument, "quantization algorithm '", info.name,
               "' is registered twice");
  }
  OASR_CHECK(algorithm_registry().size() < kAlgorithmCapacity, kInvalidArgument,
             "quantization algorithm '", info.name, "': the registry holds at most ",
             kAlgorithmCapacity, " algorithms");
  algorithm_registry().push_back(std::move(info));
}

const std::vector<QuantAlgorithmInfo>& quant_algorithms() {
  return algorithm_registry();
}

const QuantAlgorithmInfo& quant_algorithm(const std::string& name) {
  std::string known;
  for (const QuantAlgorithmInfo& info : algorithm_registry()) {
    if (info.name == name) return info;
    known += (known.empty() ? "" : ", ") + info.name;
  }
  OASR_THROW(kInvalidArgument, "unknown quantization algorithm '", name, "'; registered: ", known);
}

StaticInputScale choose_static_input_scale(const CalibrationRecorder& recorder,
                                           const std::string& path, const std::string& observer,
                                           QDType format) {
  const LayerObservation* observation = recorder.find(path);
  OASR_CHECK(
      observation != nullptr && observation->histogram && observation->histogram->count() > 0,
      kInvalidArgument, "static input scale of '", path,
      "': the calibration run never reached this layer, so its scale cannot be measured "
      "(check the calibration manifest's audio)");
  const AbsHistogram& histogram = *observation->histogram;
  StaticInputScale out;
  out.observer = observer;
  out.clip = histogram.choose_clip(observer, format);
  out.observed_max = histogram.max();
  out.values = histogram.count();
  out.input_scale = number_format(format).scale_of_amax(out.clip);
  return out;
}

void quantize_model_calibrated(Module& model, const QuantizationSpec& spec,
                               const CalibratedTensors& tensors) {
  const auto modules = modules_by_path(model);
  for (const LayerQuantization& entry : spec.layers) {
    const auto it = modules.find(entry.path);
    OASR_CHECK(it != modules.end(), kInternal, "quantize: the spec names '", entry.path,
               "', which the model does not have");
    Module& module = *it->second;
    auto* layer = dynamic_cast<layers::QuantizableLayer*>(&module);
    OASR_CHECK(layer != nullptr, kInternal, "quantize: '", entry.path, "' is not quantizable");
    const QuantScheme& scheme = spec.scheme(entry.scheme);
    const int64_t in_features = layer->quant_geometry().in_features;

    if (entry.runtime_smoothed) {
      const auto s = tensors.runtime_scale.find(entry.path);
      OASR_CHECK(s != tensors.runtime_scale.end(), kInternal, "quantize: '", entry.path,
                 "' is runtime-smoothed but SmoothQuant produced no scale for it");
      const Tensor& weight = module.param("weight");
      const Tensor scaled =
          scale_weight_columns(weight.view({weight.size(0), -1}), s->second).view(weight.shape());
      module.set_param("weight", scaled.to(weight.dtype()));
    }
    layer->quantize_weight_online(make_quant_method(scheme));
    if (entry.runtime_smoothed) {
      const std::vector<float>& inverse = tensors.smooth_inv.at(entry.path);
      OASR_CHECK(static_cast<int64_t>(inverse.size()) == in_features, kInternal, "quantize: '",
                 entry.path, "' has ", in_features, " input channels, smooth_inv ", inverse.size());
      module.register_parameter("smooth_inv", {in_features}, DType::kF32, DTypePolicy::kExact);
      module.set_param("smooth_inv", Tensor::from_vector(inverse, {in_features}));
    }
    if (scheme_has_static_input(scheme)) {
      const auto scale = tensors.static_inputs.find(entry.path);
      OASR_CHECK(scale != tensors.static_inputs.end(), kInternal, "quantize: '", entry.path,
                 "' has the static scheme ", scheme.name, " but no calibrated input scale");
      module.set_param("input_scale",
                       Tensor::from_vector(std::vector<float>{scale->second.input_scale}, {1}));
    }
  }
}

}  // namespace oasr::quant
