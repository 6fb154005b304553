#include "models/fastconformer/fastconformer_model.h"

#include "core/error.h"
#include "models/load_sequence.h"
#include "ops/log_softmax.h"

namespace oasr::models {

namespace {

// The class NeMo saved (cfg.target's last component), else the one the head implies.
std::string model_type_name(const FastConformerConfig& config) {
  if (config.target.empty()) {
    if (!config.is_transducer()) return "EncDecCTCModelBPE";
    return config.has_aux_ctc ? "EncDecHybridRNNTCTCBPEModel" : "EncDecRNNTBPEModel";
  }
  return config.target.substr(config.target.rfind('.') + 1);  // npos + 1 == 0
}

// NeMo's ConvASRDecoder: decoder_layers.0, a kernel-1 Conv1d to vocabulary + blank.
std::shared_ptr<layers::PointwiseConv1d> register_conv_asr_decoder(Module& parent,
                                                                   const std::string& name,
                                                                   const FastConformerConfig& c) {
  auto decoder = parent.register_module(name, std::make_shared<Module>("ConvASRDecoder"));
  auto decoder_layers =
      decoder->register_module("decoder_layers", std::make_shared<Module>("Sequential"));
  return decoder_layers->register_module(
      "0", std::make_shared<layers::PointwiseConv1d>(c.encoder.d_model, c.blank_id() + 1, true));
}

}  // namespace

FastConformerModel::FastConformerModel(const FastConformerConfig& config)
    : Module(model_type_name(config)), config_(config) {
  encoder_ = register_module("encoder", std::make_shared<FastConformerEncoder>(config.encoder));
  if (!config.is_transducer()) {
    ctc_head_ = register_conv_asr_decoder(*this, "decoder", config);
    return;
  }
  predictor_ = register_module("decoder", std::make_shared<RnntPredictor>(config));
  joint_ = register_module("joint", std::make_shared<RnntJoint>(config));
  if (config.has_aux_ctc) ctc_head_ = register_conv_asr_decoder(*this, "ctc_decoder", config);
}

Tensor FastConformerModel::ctc_log_probs(const Tensor& encoded) const {
  OASR_CHECK(ctc_head_ != nullptr, kInvalidArgument, "this ", type_name(),
             " has a transducer head and no CTC head");
  return ops::log_softmax(ctc_head_->forward(encoded), -1).to(Device::cpu()).to(DType::kF32);
}

FastConformerModel::Output FastConformerModel::forward(const Tensor& feats,
                                                       std::span<const int64_t> lengths) const {
  FastConformerEncoder::Output encoded = encode(feats, lengths);
  Output output;
  output.log_probs = ctc_log_probs(encoded.out);
  output.lengths = std::move(encoded.lengths);
  return output;
}

const RnntPredictor& FastConformerModel::predictor() const {
  OASR_CHECK(predictor_ != nullptr, kInvalidArgument, "this ", type_name(),
             " has a CTC head, not a transducer");
  return *predictor_;
}

const RnntJoint& FastConformerModel::joint() const {
  OASR_CHECK(joint_ != nullptr, kInvalidArgument, "this ", type_name(),
             " has a CTC head, not a transducer");
  return *joint_;
}

quant::QuantLayout fastconformer_quantization_layout(const FastConformerConfig& config) {
  quant::QuantLayout layout;
  layout.architecture = "NeMo FastConformer";
  layout.keep_full_precision = {
      {"encoder.pre_encode.*", "the subsampling (spec: kept full precision)"},
      {"encoder.layers.*.self_attn.linear_pos",
       "the relative position projection (spec: kept full precision)"},
      {"decoder.prediction.*", "the transducer's predictor (spec: kept full precision)"},
      {"joint.enc", "the transducer's joint (spec: kept full precision)"},
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
  out.model = std::make_unique<FastConformerModel>(source.config);
  out.spec =
      load_model(*out.model, fastconformer_quantization_layout(source.config),
                 {source.weights.get(), nlohmann::json(), source.path}, quantization, options);
  return out;
}

}  // namespace oasr::models
