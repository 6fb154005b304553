// Whisper's quantization layout and its load sequence (the one of
// models/u2pp/materialize.h): build from the config; a quantized directory's
// own spec (its 8-bit slots prepared), or the requested online spec; strict
// load of the HF state dict with the tied head handled; online quantization
// where asked; the dtype cast and device move; lane binding and the fused
// producers' links the layout declares.
#pragma once

#include <memory>

#include "models/u2pp/materialize.h"
#include "models/whisper/whisper_config.h"
#include "models/whisper/whisper_model.h"
#include "quant/apply.h"
#include "quant/spec.h"

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
// SmoothQuant's folds (quant/algorithms/smoothquant.h), per layer: every pre-norm's
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
