// The one load sequence every architecture's materialize() runs (spec "Load
// order"), after building its model from the checkpoint's config:
//   1a. a quantized native checkpoint (format_version 2): its spec is
//       authoritative (a request may only repeat its scheme); each quantized
//       layer's slots are created before the strict, dtype-checked load;
//   1b. otherwise the requested spec is selected over the model's layers,
//       the full-precision weights load strictly, then each selected layer
//       quantizes its own weight on the host (online);
//   2. the architecture's hooks: one sees the resolved spec (Whisper: the
//      fp8 KV cache's layout), one follows the load (Whisper: the tied head);
//   3. the dtype cast (quantized tensors keep theirs), the device move, and
//      lane binding: each quantized layer picks its kernel once, then the
//      fused producers the layout declares are linked.
// The architecture supplies only what differs: its model, its layout, the
// weights, the checkpoint's spec JSON and the hook.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "asr/materialize_options.h"
#include "layers/module.h"
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

using engine::MaterializeOptions;

struct LoadSource {
  const TensorSource* weights = nullptr;  // the checkpoint's state dict
  // The spec of a quantized native checkpoint (oasr_config.json
  // "quantization"); null for full precision.
  nlohmann::json quantization;
  std::filesystem::path dir;  // named in messages
};

struct LoadHooks {
  // After the spec is resolved, before the weights load (Whisper sets its
  // KV cache's layout from spec.kv_cache).
  std::function<void(const quant::QuantizationSpec& spec)> spec_resolved;
  // After the strict load, before online quantization (Whisper ties its
  // output head to the embedding when the checkpoint has none).
  std::function<void()> weights_loaded;
};

// Runs steps 1-3 on `model` (built, its weights not yet loaded); returns the
// served spec (empty when served full precision).
quant::QuantizationSpec load_model(Module& model, const quant::QuantLayout& layout,
                                   const LoadSource& source,
                                   const quant::QuantizationConfig& quantization,
                                   const MaterializeOptions& options, const LoadHooks& hooks = {});

// Before a model is built from its config: refuses a configured count of
// repeated blocks that the checkpoint's tensor `names` do not hold
// ("PREFIX<i>." for i = 0 .. count - 1), naming the config key, its file and what the
// tensors hold. Building first would allocate a module per configured block
// -- minutes and gigabytes for an absurd count -- before the strict load
// could refuse it.
void check_block_count(const std::vector<std::string>& names, const std::string& prefix,
                       int64_t configured, const std::string& config_key,
                       const std::filesystem::path& config_file);

}  // namespace oasr::models
