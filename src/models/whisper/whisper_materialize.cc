#include "models/whisper/whisper_materialize.h"

#include "core/error.h"
#include "models/load_sequence.h"
#include "models/native_dir.h"
#include "quantize/apply_links.h"

namespace oasr::models {

namespace {

using quant::SmoothFold;
using quant::SmoothGroup;

// A pre-norm's output feeds only its GEMMs, so 1/s goes into its affine.
// `fused`: the layer reads the norm through forward_to_gemm, so a linked
// norm may emit the GEMMs' 8-bit input itself.
void add_norm_group(quant::QuantLayout& layout, const std::string& norm,
                    std::vector<std::string> consumers, bool fused) {
  layout.smooth_groups.push_back({SmoothFold::kNormAffine, norm, std::move(consumers), fused});
}

// fc1 -> GELU -> fc2: GELU is not positively homogeneous, so fc2 smooths its
// own input at runtime; under the *_fused recipes fc1 quantizes for fc2.
void add_ffn(quant::QuantLayout& layout, const std::string& p) {
  add_norm_group(layout, p + "final_layer_norm", {p + "fc1"}, true);
  layout.smooth_groups.push_back({SmoothFold::kRuntime, "", {p + "fc2"}, false});
  layout.gemm_chains.push_back({p + "fc1", p + "fc2"});
}

// Attention is linear in V per channel: 1/s goes into v_proj's rows.
void add_v_to_o(quant::QuantLayout& layout, const std::string& attention) {
  layout.smooth_groups.push_back(
      {SmoothFold::kVToO, attention + ".v_proj", {attention + ".out_proj"}, false});
}

}  // namespace

quant::QuantLayout whisper_quantization_layout(const WhisperConfig& config) {
  quant::QuantLayout layout;
  layout.architecture = "Whisper";
  layout.keep_full_precision = {
      {"proj_out", "the tied output head (shares model.decoder.embed_tokens.weight)"},
  };
  layout.has_ar_kv_cache = true;
  for (int64_t i = 0; i < config.encoder_layers; ++i) {
    const std::string p = "model.encoder.layers." + std::to_string(i) + ".";
    add_norm_group(layout, p + "self_attn_layer_norm",
                   {p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"}, true);
    add_v_to_o(layout, p + "self_attn");
    add_ffn(layout, p);
  }
  for (int64_t i = 0; i < config.decoder_layers; ++i) {
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    // The cached self-attention and the cross-attention read the norms'
    // served-dtype output (their query rows are few), so these two norms
    // fold 1/s without emitting 8-bit output.
    add_norm_group(layout, p + "self_attn_layer_norm",
                   {p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"}, false);
    add_v_to_o(layout, p + "self_attn");
    add_norm_group(layout, p + "encoder_attn_layer_norm", {p + "encoder_attn.q_proj"}, false);
    // The encoder output is the memory of every decoder layer: each layer's
    // key and value projections smooth it at runtime, once per utterance.
    layout.smooth_groups.push_back(
        {SmoothFold::kRuntime, "", {p + "encoder_attn.k_proj", p + "encoder_attn.v_proj"}, false});
    add_v_to_o(layout, p + "encoder_attn");
    add_ffn(layout, p);
  }
  return layout;
}

MaterializedWhisper materialize_whisper_model(const WhisperSource& source,
                                              const quant::QuantizationConfig& quantization,
                                              const MaterializeOptions& options) {
  MaterializedWhisper out;
  const std::vector<std::string> names = source.weights->names();
  check_block_count(names, "model.encoder.layers.", source.config.encoder_layers, "encoder_layers",
                    source.dir / "config.json");
  check_block_count(names, "model.decoder.layers.", source.config.decoder_layers, "decoder_layers",
                    source.dir / "config.json");
  out.model = std::make_unique<WhisperModel>(source.config);
  WhisperModel& model = *out.model;
  LoadHooks hooks;
  hooks.spec_resolved = [&model](const quant::QuantizationSpec& spec) {
    model.set_fp8_kv_cache(spec.kv_cache == "fp8_e4m3");
  };
  // HF's save_pretrained drops the tied proj_out.weight.
  hooks.weights_loaded = [&model] { model.tie_output_head(); };
  out.spec = load_model(model, whisper_quantization_layout(source.config),
                        {source.weights.get(), source.quantization, source.dir}, quantization,
                        options, hooks);
  return out;
}

}  // namespace oasr::models
