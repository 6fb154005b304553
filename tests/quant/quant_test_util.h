// Test helpers shared by the quantization end-to-end tests.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/asr_engine.h"
#include "models/u2pp/native_checkpoint.h"
#include "models/u2pp/u2pp_recognizer.h"

namespace oasr::testing {

// The U2++ model an engine serves (refused by name for another architecture).
inline const models::U2ppModel& u2pp_model(const engine::ASREngine& engine) {
  return engine.recognizer_as<engine::U2ppRecognizer>().model();
}

// The engine's quantized model written as a native format_version 2 directory.
inline std::filesystem::path write_quantized_checkpoint(const engine::ASREngine& engine,
                                                        const std::filesystem::path& source_dir,
                                                        const std::filesystem::path& out) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto& model = const_cast<models::U2ppModel&>(u2pp_model(engine));
  for (auto& [name, slot] : model.named_parameters()) {
    if (slot->value.defined()) tensors.emplace_back(name, slot->value);
  }
  models::ModelSource source = models::load_checkpoint_dir(source_dir);
  source.weights = std::make_shared<OrderedTensorSource>(std::move(tensors));
  quant::QuantizationSpec spec = engine.quantization_spec();
  spec.online = false;
  spec.producer["recipe"] = "int8_w8a8_rtn";
  source.quantization = nlohmann::json::parse(spec.to_json().dump());
  models::save_native_checkpoint(source, out);
  return out;
}

}  // namespace oasr::testing
