// The contents of a native format_version 2 checkpoint (DESIGN.md §4): the
// state dict of a model quantized under a QuantizationSpec, checked against
// the quantized state-dict layout (per layer: weight, weight_scale, optional
// input_scale / smooth_inv, bias) before anything is written. The
// directory itself (oasr_config.json carrying the spec, model.safetensors,
// tokenizer assets, the atomic staging and rename) is written by
// models::save_native_checkpoint, which writes version 2 for a source that
// carries a spec; `oasr quantize` (cli/quantize_command.cc) joins the two.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "layers/module.h"
#include "quant/spec.h"

namespace oasr::quant {

// The tensors to store, in the model's state-dict order:
//   a quantized layer (every layer of `spec`): its method's tensors as the
//     table says -- weight int8 | float8_e4m3fn in the layer's own shape
//     ([N, K]; [N, K, 1] for a pointwise conv), weight_scale fp32 [N],
//     smooth_inv fp32 [K] only when runtime-smoothed, input_scale fp32 [1]
//     only with a static input scale; its bias as `original` holds it;
//   every other tensor exactly as `original` holds it (its dtype and bits:
//     the model's fp32 copy is not what is written), except the names in
//     `rewritten` (parameters SmoothQuant folded a scale into), which are the
//     model's values converted to the original's dtype;
//   then any tensor of `original` the model does not hold, in its order.
// Refuses (kInternal, naming the tensor) a quantized layer whose tensors do
// not follow the table, and a model parameter `original` lacks.
std::vector<std::pair<std::string, Tensor>> quantized_state_dict(
    Module& model, const QuantizationSpec& spec, const TensorSource& original,
    const std::set<std::string>& rewritten = {});

}  // namespace oasr::quant
