#include "layers/quantizable.h"

#include "core/error.h"

namespace oasr::layers {

std::string gemm_alignment_refusal(int64_t in_features, int64_t out_features, const char* in_name,
                                   const char* out_name) {
  if (in_features % 16 != 0) {
    return std::string(in_name) + " " + std::to_string(in_features) +
           " is not a multiple of 16, which the 8-bit GEMMs need";
  }
  if (out_features % 8 != 0) {
    return std::string(out_name) + " " + std::to_string(out_features) +
           " is not a multiple of 8, which the 8-bit GEMMs need";
  }
  return "";
}

std::string QuantizableLayer::quant_refusal(const quant::QuantScheme& /*scheme*/) const {
  const quant::GemmGeometry g = quant_geometry();
  return gemm_alignment_refusal(g.in_features, g.out_features);
}

void QuantizableLayer::attach_quant_method(std::unique_ptr<quant::QuantMethod> method,
                                           bool runtime_smoothed) {
  OASR_CHECK(method != nullptr, kInternal, "attach_quant_method: null method");
  Module& module = quant_module();
  OASR_CHECK(!quantized(), kInvalidArgument, module.type_name(), " '", module.path(),
             "' is already quantized (", quant_method_->scheme().name, ")");
  const std::string refusal = quant_refusal(method->scheme());
  OASR_CHECK(refusal.empty(), kUnsupported, module.type_name(), " '", module.path(),
             "' cannot be quantized with ", method->scheme().name, ": ", refusal);
  for (const quant::StorageSlot& slot : method->storage(quant_geometry(), runtime_smoothed)) {
    if (module.has_parameter(slot.name)) {
      module.redeclare_parameter(slot.name, slot.shape, slot.dtype, DTypePolicy::kExact);
    } else {
      module.register_parameter(slot.name, slot.shape, slot.dtype, DTypePolicy::kExact);
    }
  }
  quant_method_ = std::move(method);
}

void QuantizableLayer::quantize_weight_online(std::unique_ptr<quant::QuantMethod> method) {
  OASR_CHECK(method != nullptr, kInternal, "quantize_weight_online: null method");
  const Module& module = quant_module();
  OASR_CHECK(module.slot("weight").value.defined(), kInvalidArgument, module.type_name(), " '",
             module.path(), "': online quantization needs its full-precision weight loaded first");
  const Tensor fp_weight = fp_weight_matrix();
  quant::QuantizedWeight q = method->quantize_weight(fp_weight);
  const quant::GemmGeometry geometry = quant_geometry();
  attach_quant_method(std::move(method));
  Module& m = quant_module();
  m.set_param("weight", q.weight.view(geometry.quantized_weight_shape));
  m.set_param("weight_scale", q.weight_scale);
}

void QuantizableLayer::bind_quant(const quant::BindOptions& options) {
  if (!quantized()) return;
  quant_method_->bind(options, quant_params());
}

quant::QuantizedParams QuantizableLayer::quant_params() const {
  const Module& module = quant_module();
  const quant::GemmGeometry geometry = quant_geometry();
  quant::QuantizedParams params;
  params.weight = module.param("weight").view({geometry.out_features, geometry.gemm_k()});
  params.weight_scale = module.param("weight_scale");
  if (module.has_parameter("smooth_inv")) params.smooth_inv = module.param("smooth_inv");
  if (module.has_parameter("input_scale")) params.input_scale = module.param("input_scale");
  if (module.has_parameter("bias")) params.bias = module.param("bias");
  return params;
}

Tensor QuantizableLayer::quant_forward(const Tensor& x, Activation act) const {
  return quant_method_->forward(x, quant_params(), act);
}

}  // namespace oasr::layers
