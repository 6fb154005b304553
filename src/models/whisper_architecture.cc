// Whisper's architecture descriptor (models/architecture.h): Hugging Face
// layout directories (config.json with model_type "whisper"), which is also
// what `oasr convert --from ct2|hf` writes.
#include "core/error.h"
#include "models/architecture.h"
#include "models/whisper_convert.h"
#include "models/whisper_dir.h"
#include "models/whisper_materialize.h"

namespace oasr::models {

Architecture whisper_architecture() {
  Architecture architecture;
  architecture.name = kWhisperArchitectureName;
  architecture.display_name = "Whisper";
  architecture.serves_cuda = false;  // [W2-WC] ports it
  architecture.detect = [](const std::filesystem::path& path) { return is_whisper_dir(path); };
  architecture.materialize = [](const std::filesystem::path& path,
                                const quant::QuantizationConfig& quantization,
                                const MaterializeOptions& options) {
    MaterializedWhisper loaded =
        materialize_whisper_model(load_whisper_dir(path), quantization, options);
    return MaterializedModel{std::move(loaded.model), std::move(loaded.spec)};
  };
  architecture.quantization_layout = [](const Module&) { return whisper_quantization_layout(); };
  return architecture;
}

}  // namespace oasr::models
