#include "models/whisper/whisper_materialize.h"

#include "core/error.h"

namespace oasr::models {

quant::QuantLayout whisper_quantization_layout() {
  quant::QuantLayout layout;
  layout.architecture = "Whisper";
  layout.keep_full_precision = {
      {"proj_out", "the tied output head (shares model.decoder.embed_tokens.weight)"},
  };
  layout.has_ar_kv_cache = true;
  return layout;
}

MaterializedWhisper materialize_whisper_model(const WhisperSource& source,
                                              const quant::QuantizationConfig& quantization,
                                              const MaterializeOptions& options) {
  OASR_CHECK(source.weights != nullptr, kInvalidArgument, "load: the Whisper source from ",
             source.dir.string(), " holds no weights");
  quantization.validate();
  MaterializedWhisper out;
  out.model = std::make_unique<WhisperModel>(source.config);
  WhisperModel& model = *out.model;
  quant::SpecOptions spec_options;
  spec_options.online = true;
  spec_options.recipe = options.recipe;
  // The spec is chosen (and refused) before any weight is read.
  out.spec =
      quant::spec_from_config(quantization, model, whisper_quantization_layout(), spec_options);
  model.load(*source.weights);  // strict; ties proj_out to embed_tokens when absent
  quant::quantize_model_online(model, out.spec);
  model.set_fp8_kv_cache(out.spec.kv_cache == "fp8_e4m3");
  model.to(options.dtype);
  model.to(options.device);
  if (options.bind) {
    quant::BindOptions bind;
    bind.device = options.device;
    bind.backend = options.scaled_mm_backend;
    quant::bind_quantization(model, bind);
  }
  return out;
}

}  // namespace oasr::models
