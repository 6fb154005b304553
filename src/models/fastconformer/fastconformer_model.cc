#include "models/fastconformer/fastconformer_model.h"

#include "models/load_sequence.h"
#include "ops/log_softmax.h"

namespace oasr::models {

FastConformerCtcModel::FastConformerCtcModel(const FastConformerConfig& config)
    : Module("EncDecCTCModelBPE"), config_(config) {
  encoder_ = register_module("encoder", std::make_shared<FastConformerEncoder>(config.encoder));
  auto decoder = register_module("decoder", std::make_shared<Module>("ConvASRDecoder"));
  auto decoder_layers =
      decoder->register_module("decoder_layers", std::make_shared<Module>("Sequential"));
  ctc_head_ = decoder_layers->register_module(
      "0", std::make_shared<layers::PointwiseConv1d>(config.encoder.d_model, config.blank_id() + 1,
                                                     true));
}

FastConformerCtcModel::Output FastConformerCtcModel::forward(
    const Tensor& feats, std::span<const int64_t> lengths) const {
  FastConformerEncoder::Output encoded = encoder_->forward(feats, lengths);
  Output output;
  output.log_probs =
      ops::log_softmax(ctc_head_->forward(encoded.out), -1).to(Device::cpu()).to(DType::kF32);
  output.lengths = std::move(encoded.lengths);
  return output;
}

quant::QuantLayout fastconformer_quantization_layout(const FastConformerConfig& config) {
  quant::QuantLayout layout;
  layout.architecture = "NeMo FastConformer";
  layout.keep_full_precision = {
      {"encoder.pre_encode.*", "the subsampling (spec: kept full precision)"},
      {"encoder.layers.*.self_attn.linear_pos",
       "the relative position projection (spec: kept full precision)"},
  };
  layout.has_ar_kv_cache = false;
  for (int64_t i = 0; i < config.encoder.n_layers; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i) + ".";
    for (const char* ffn : {"feed_forward1", "feed_forward2"}) {
      layout.gemm_chains.push_back({p + ffn + ".linear1", p + ffn + ".linear2"});
    }
  }
  layout.batch_invariant = {"encoder.pre_encode.out"};
  return layout;
}

MaterializedFastConformer materialize_fastconformer_model(
    const NemoSource& source, const quant::QuantizationConfig& quantization,
    const engine::MaterializeOptions& options) {
  check_block_count(source.weights->names(), "encoder.layers.", source.config.encoder.n_layers,
                    "encoder.n_layers", source.path / "model_config.yaml");
  MaterializedFastConformer out;
  out.model = std::make_unique<FastConformerCtcModel>(source.config);
  out.spec =
      load_model(*out.model, fastconformer_quantization_layout(source.config),
                 {source.weights.get(), nlohmann::json(), source.path}, quantization, options);
  return out;
}

}  // namespace oasr::models
