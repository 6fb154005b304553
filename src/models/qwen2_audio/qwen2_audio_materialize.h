// Qwen2-Audio's load sequence (models/load_sequence.h) and what its
// structure lets quantization do (spec "Architecture / Kept full
// precision": lm_head and multi_modal_projector stay full precision; the
// audio tower's conv front-end too unless module_types adds conv1d). No
// smoothing layout is declared yet, so SmoothQuant refuses the architecture
// by name while online quantization and the fp8 KV cache serve it.
#pragma once

#include <memory>

#include "asr/materialize_options.h"
#include "models/qwen2_audio/qwen2_audio_dir.h"
#include "models/qwen2_audio/qwen2_audio_model.h"
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

quant::QuantLayout qwen2_audio_quantization_layout(const Qwen2AudioConfig& config);

struct MaterializedQwen2Audio {
  std::unique_ptr<Qwen2AudioModel> model;
  quant::QuantizationSpec spec;
};

MaterializedQwen2Audio materialize_qwen2_audio_model(const Qwen2AudioSource& source,
                                                     const quant::QuantizationConfig& quantization,
                                                     const engine::MaterializeOptions& options);

}  // namespace oasr::models
