#include "quantize/export.h"

#include <map>
#include <set>

#include "core/error.h"
#include "layers/quantizable.h"
#include "quant/number_format.h"

namespace oasr::quant {

namespace {

struct Expected {
  DType dtype;
  Shape shape;
};

// The quantized state-dict entries one layer must have (weight, weight_scale,
// optional input_scale / smooth_inv, bias in the served dtype).
void add_expected_tensors(const LayerQuantization& entry, const QuantScheme& scheme,
                          const GemmGeometry& geometry, std::map<std::string, Expected>* out) {
  const NumberFormat& format = number_format(scheme.weight.dtype);
  OASR_CHECK(format.exportable, kUnsupported, "export: layer '", entry.path, "' has scheme ",
             scheme.name, ", whose ", format.name,
             " weights have no native checkpoint storage; serve it online instead");
  const DType weight_dtype = format.storage;
  (*out)[entry.path + ".weight"] = {weight_dtype, geometry.quantized_weight_shape};
  (*out)[entry.path + ".weight_scale"] = {DType::kF32, {geometry.out_features}};
  if (entry.runtime_smoothed) {
    (*out)[entry.path + ".smooth_inv"] = {DType::kF32, {geometry.in_features}};
  }
  if (scheme_has_static_input(scheme)) (*out)[entry.path + ".input_scale"] = {DType::kF32, {1}};
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> quantized_state_dict(
    Module& model, const QuantizationSpec& spec, const TensorSource& original,
    const std::set<std::string>& rewritten) {
  std::map<std::string, Module*> modules;
  for (auto& [path, module] : model.named_modules()) modules[path] = module;

  std::map<std::string, Expected> expected;
  std::vector<std::string> quantized_prefixes;
  for (const LayerQuantization& entry : spec.layers) {
    const auto it = modules.find(entry.path);
    OASR_CHECK(it != modules.end(), kInternal, "export: the spec names layer '", entry.path,
               "', which the model does not have");
    const auto* layer = dynamic_cast<const layers::QuantizableLayer*>(it->second);
    OASR_CHECK(layer != nullptr && layer->quantized(), kInternal, "export: layer '", entry.path,
               "' is in the spec but holds no quantized weight (quantize the model first)");
    add_expected_tensors(entry, spec.scheme(entry.scheme), layer->quant_geometry(), &expected);
    quantized_prefixes.push_back(entry.path + ".");
  }
  auto in_quantized_layer = [&](const std::string& name) {
    for (const std::string& prefix : quantized_prefixes) {
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          name.find('.', prefix.size()) == std::string::npos) {
        return true;
      }
    }
    return false;
  };

  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> written;
  // Storage of the slots already visited: an optional slot tied to one of
  // them (Whisper's proj_out shares embed_tokens) is re-tied by the loader.
  std::set<const void*> visited_storage;
  for (auto& [name, slot] : model.named_parameters()) {
    const void* storage = slot->value.defined() ? slot->value.raw_data() : nullptr;
    const bool tied = storage != nullptr && visited_storage.count(storage) > 0;
    if (storage != nullptr) visited_storage.insert(storage);
    if (tied && !slot->required && !original.contains(name)) continue;
    const auto want = expected.find(name);
    if (want != expected.end()) {
      const Tensor& value = slot->value;
      OASR_CHECK(value.defined() && value.dtype() == want->second.dtype &&
                     value.shape() == want->second.shape,
                 kInternal, "export: ", name, " is ",
                 value.defined() ? dtype_name(value.dtype()) + shape_str(value.shape())
                                 : std::string("unset"),
                 "; the quantized state-dict table says ", dtype_name(want->second.dtype),
                 shape_str(want->second.shape));
      tensors.emplace_back(name, value.to(Device::cpu()));
    } else if (original.contains(name) && rewritten.count(name) > 0) {
      const Tensor& value = slot->value;
      OASR_CHECK(value.defined() && value.shape() == original.shape(name), kInternal,
                 "export: ", name, " was rewritten with shape ",
                 value.defined() ? shape_str(value.shape()) : std::string("unset"),
                 "; the source holds ", shape_str(original.shape(name)));
      tensors.emplace_back(name, value.to(Device::cpu()).to(original.dtype(name)));
    } else if (original.contains(name)) {
      tensors.emplace_back(name, original.get(name));
    } else {
      // An unset optional slot has nothing to store.
      if (!slot->value.defined() && !slot->required) continue;
      OASR_THROW(kInternal, "export: ", name,
                 in_quantized_layer(name)
                     ? " is held by a quantized layer but is not in the quantized state-dict table"
                     : " is a model parameter the source checkpoint does not hold");
    }
    written.insert(name);
  }
  for (const auto& [name, want] : expected) {
    OASR_CHECK(written.count(name) > 0, kInternal, "export: the quantized layer has no ", name,
               " (", dtype_name(want.dtype), shape_str(want.shape), ")");
  }
  for (const std::string& name : original.names()) {
    if (written.insert(name).second) tensors.emplace_back(name, original.get(name));
  }
  return tensors;
}

}  // namespace oasr::quant
