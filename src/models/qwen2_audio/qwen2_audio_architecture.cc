// Qwen2-Audio's architecture descriptor (models/architecture.h): Hugging
// Face directories whose config.json has model_type "qwen2_audio", served as
// they are (no convert layout: the directory is already what oasr reads).
#include "core/error.h"
#include "models/architecture.h"
#include "models/qwen2_audio/qwen2_audio_dir.h"
#include "models/qwen2_audio/qwen2_audio_materialize.h"
#include "models/qwen2_audio/qwen2_audio_recognizer.h"

namespace oasr::models {

Architecture qwen2_audio_architecture() {
  Architecture architecture;
  architecture.name = kQwen2AudioArchitectureName;
  architecture.display_name = "Qwen2-Audio";
  // CUDA: float32 / float16 / bfloat16, the LM's attention through the
  // paged cached-attention kernel (head_dim 16, 32, 64 or 128; tests/oracle/
  // test_qwen2_audio.cc's Cuda tests on a device).
  architecture.serves_cuda = true;
  architecture.detect = [](const std::filesystem::path& path) { return is_qwen2_audio_dir(path); };
  architecture.rejection = qwen2_audio_dir_rejection;
  architecture.looks_for =
      "a directory whose config.json has model_type qwen2_audio (Hugging Face's "
      "save_pretrained layout)";
  architecture.make_recognizer = engine::qwen2_audio_recognizer_factory();
  architecture.decode_options = engine::qwen2_audio_decode_options();
  architecture.materialize = [](const std::filesystem::path& path,
                                const quant::QuantizationConfig& quantization,
                                const MaterializeOptions& options) {
    MaterializedQwen2Audio loaded =
        materialize_qwen2_audio_model(load_qwen2_audio_dir(path), quantization, options);
    return MaterializedModel{std::move(loaded.model), std::move(loaded.spec)};
  };
  architecture.quantization_layout = [](const Module& model) {
    const auto* qwen = dynamic_cast<const Qwen2AudioModel*>(&model);
    OASR_CHECK(qwen != nullptr, kInternal, "the Qwen2-Audio quantization layout got a ",
               model.type_name(), " model, not a Qwen2AudioModel");
    return qwen2_audio_quantization_layout(qwen->config());
  };
  return architecture;
}

}  // namespace oasr::models
