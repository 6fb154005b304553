#include "models/qwen2_audio/qwen2_audio_materialize.h"

#include "models/load_sequence.h"

namespace oasr::models {

quant::QuantLayout qwen2_audio_quantization_layout(const Qwen2AudioConfig& config) {
  (void)config;
  quant::QuantLayout layout;
  layout.architecture = "Qwen2-Audio";
  layout.keep_full_precision = {
      {"language_model.lm_head", "the LM's output head (spec: kept full precision)"},
      {"multi_modal_projector.*", "the audio-to-text projector (spec: kept full precision)"},
  };
  layout.has_ar_kv_cache = true;
  return layout;
}

MaterializedQwen2Audio materialize_qwen2_audio_model(const Qwen2AudioSource& source,
                                                     const quant::QuantizationConfig& quantization,
                                                     const engine::MaterializeOptions& options) {
  const std::vector<std::string> names = source.weights->names();
  const std::filesystem::path config_file = source.dir / "config.json";
  check_block_count(names, "audio_tower.layers.", source.config.audio.encoder_layers,
                    "audio_config.encoder_layers", config_file);
  check_block_count(names, "language_model.model.layers.", source.config.text.num_hidden_layers,
                    "text_config.num_hidden_layers", config_file);
  MaterializedQwen2Audio out;
  out.model = std::make_unique<Qwen2AudioModel>(source.config);
  Qwen2AudioModel& model = *out.model;
  LoadHooks hooks;
  hooks.spec_resolved = [&model](const quant::QuantizationSpec& spec) {
    model.set_fp8_kv_cache(spec.kv_cache == "fp8_e4m3");
  };
  hooks.weights_loaded = [&model] { model.tie_output_head(); };
  out.spec = load_model(model, qwen2_audio_quantization_layout(source.config),
                        {source.weights.get(), nlohmann::json(), source.dir}, quantization, options,
                        hooks);
  return out;
}

}  // namespace oasr::models
