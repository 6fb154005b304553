// NeMo FastConformer's architecture descriptor (models/architecture.h): .nemo
// archives as NeMo's save_to writes them, or the same members unpacked in a
// directory, served as they are (no convert layout yet).
#include "core/error.h"
#include "models/architecture.h"
#include "models/fastconformer/fastconformer_model.h"
#include "models/fastconformer/fastconformer_recognizer.h"
#include "models/fastconformer/nemo_source.h"

namespace oasr::models {

Architecture fastconformer_architecture() {
  Architecture architecture;
  architecture.name = kFastConformerArchitectureName;
  architecture.display_name = "NeMo FastConformer";
  // Every op of the encoder has a CUDA body, but the path has not run on a
  // device against the oracle yet: --device cuda is refused by name until
  // it has.
  architecture.serves_cuda = false;
  architecture.detect = [](const std::filesystem::path& path) { return is_nemo_checkpoint(path); };
  architecture.looks_for =
      "a NeMo .nemo archive, or a directory holding its model_config.yaml and "
      "model_weights.ckpt";
  architecture.make_recognizer = engine::fastconformer_recognizer_factory();
  architecture.decode_options = engine::fastconformer_decode_options();
  architecture.materialize = [](const std::filesystem::path& path,
                                const quant::QuantizationConfig& quantization,
                                const MaterializeOptions& options) {
    MaterializedFastConformer loaded =
        materialize_fastconformer_model(load_nemo_checkpoint(path), quantization, options);
    return MaterializedModel{std::move(loaded.model), std::move(loaded.spec)};
  };
  architecture.quantization_layout = [](const Module& model) {
    const auto* fc = dynamic_cast<const FastConformerModel*>(&model);
    OASR_CHECK(fc != nullptr, kInternal, "the FastConformer quantization layout got a ",
               model.type_name(), " model, not a FastConformerModel");
    return fastconformer_quantization_layout(fc->config());
  };
  return architecture;
}

}  // namespace oasr::models
