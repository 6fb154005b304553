// Whisper's quantization layout and its materialize(): the model built from
// the config, then the shared load sequence (models/load_sequence.h) with
// Whisper's hooks (the fp8 KV cache's layout from the spec, the output head
// tied to the embedding when the checkpoint has none).
#pragma once

#include <memory>

#include "models/load_sequence.h"
#include "models/whisper/whisper_config.h"
#include "models/whisper/whisper_model.h"
#include "quant/spec.h"
#include "quantize/apply.h"

namespace oasr::models {

// What Whisper keeps full precision (spec "What stays full precision": the
// conv front-end unless module_types adds conv1d, the tied output head).
// The conv front-end needs no entry: conv1 / conv2 are Conv1d layers of the
// conv1d kind, which the default kinds do not select, so they are quantized
// only when module_types names conv1d (a calibrated `oasr quantize`; online
// refuses conv kinds). The embeddings (embed_tokens, both position tables)
// are not GEMMs and never quantized. proj_out shares embed_tokens' weight.
// The decoder's self-attention KV cache is autoregressive.
//
// SmoothQuant's folds (quantize/smoothquant.h), per layer: every pre-norm's
// affine absorbs 1/s of the GEMMs it feeds (q/k/v, the cross-attention's
// q, fc1); v_proj's rows absorb out_proj's, in self- and cross-attention;
// fc2 (after GELU) and the cross-attention's k/v (the encoder output) smooth
// at runtime. fc1 -> fc2 is a GEMM chain. The encoder's two norms and the
// decoder's final_layer_norm emit 8-bit output when linked.
quant::QuantLayout whisper_quantization_layout(const WhisperConfig& config);

struct MaterializedWhisper {
  std::unique_ptr<WhisperModel> model;
  quant::QuantizationSpec spec;  // empty when served full precision
};

// A full-precision source (an HF or format_version 1 directory) is quantized
// online as `quantization` asks; a format_version 2 one (oasr quantize) is
// served by its own spec, which `quantization` may only name
// (quant::resolve_checkpoint_spec). Bound models get the layout's fused
// producers linked.
MaterializedWhisper materialize_whisper_model(const WhisperSource& source,
                                              const quant::QuantizationConfig& quantization = {},
                                              const MaterializeOptions& options = {});

}  // namespace oasr::models
