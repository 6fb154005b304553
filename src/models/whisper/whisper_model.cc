#include "models/whisper/whisper_model.h"

#include <string>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/kv_fp8.h"
#include "ops/step_tokens.h"

namespace oasr::models {
namespace {

// A node of the module tree that only holds children ("model", "layers").
std::shared_ptr<Module> container(const char* type_name) {
  return std::make_shared<Module>(type_name);
}

}  // namespace

WhisperEncoder::WhisperEncoder(const WhisperConfig& config) : Module("WhisperEncoder") {
  trunk_ = WhisperEncoderTrunk(
      *this, {config.num_mel_bins, config.d_model, config.encoder_layers,
              config.encoder_attention_heads, config.encoder_ffn_dim, config.max_source_positions});
  layer_norm_ = register_module("layer_norm", std::make_shared<layers::LayerNorm>(config.d_model));
}

Tensor WhisperEncoder::forward(const Tensor& mel) const {
  return layer_norm_->forward(trunk_.forward(mel, Tensor(), "Whisper encoder"));
}

WhisperDecoder::WhisperDecoder(const WhisperConfig& config)
    : Module("WhisperDecoder"), config_(config) {
  const int64_t d = config.d_model;
  embed_tokens_ =
      register_module("embed_tokens", std::make_shared<layers::Embedding>(config.vocab_size, d));
  embed_positions_ = register_module(
      "embed_positions", std::make_shared<layers::Embedding>(config.max_target_positions, d));
  auto list = register_module("layers", container("ModuleList"));
  for (int64_t i = 0; i < config.decoder_layers; ++i) {
    layers_.push_back(list->register_module(
        std::to_string(i), std::make_shared<WhisperDecoderLayer>(d, config.decoder_attention_heads,
                                                                 config.decoder_ffn_dim)));
  }
  layer_norm_ = register_module("layer_norm", std::make_shared<layers::LayerNorm>(d));
}

Tensor WhisperDecoder::forward(const Tensor& tokens,
                               const std::vector<layers::AttentionMemory>& cross,
                               std::span<const int64_t> cross_rows, layers::KvCache& cache,
                               const WhisperDeviceStep& device) const {
  const int64_t start = cache.length();
  const int64_t steps = tokens.size(1);
  OASR_CHECK(start + steps <= config_.max_target_positions, kInvalidArgument,
             "Whisper decoder: positions ", start, "..", start + steps - 1,
             " exceed max_target_positions ", config_.max_target_positions,
             " (the learned position table); stop decoding at ", config_.max_target_positions,
             " tokens");
  const Tensor& table = embed_positions_->param("weight");
  // The same rows either way; the device's count keeps a replay's positions
  // those of its own step.
  Tensor hidden;
  if (device.past_tokens.defined()) {
    // A step a device graph may record: no id goes back to the host for its
    // check (the step checked the tokens before they moved; the positions
    // are in range by the cache's capacity).
    const Tensor positions =
        ops::embedding_device_ids(ops::positions_after(device.past_tokens, steps), table);
    hidden =
        ops::add(ops::embedding_device_ids(tokens.to(DType::kI64), embed_tokens_->param("weight")),
                 positions);
  } else {
    const Tensor positions = table.narrow(0, start, steps).contiguous();
    hidden = ops::add(embed_tokens_->forward(tokens.to(positions.device())), positions);
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    hidden =
        layers_[l]->forward(hidden, cache, static_cast<int64_t>(l), cross[l], cross_rows, device);
  }
  return layer_norm_->forward(hidden);
}

WhisperModel::WhisperModel(const WhisperConfig& config)
    : Module("WhisperForConditionalGeneration"), config_(config) {
  config.validate("Whisper config");
  auto model = register_module("model", container("WhisperModel"));
  encoder_ = model->register_module("encoder", std::make_shared<WhisperEncoder>(config));
  decoder_ = model->register_module("decoder", std::make_shared<WhisperDecoder>(config));
  proj_out_ = register_module(
      "proj_out", std::make_shared<layers::Linear>(config.d_model, config.vocab_size, false));
  // The head sees decoder steps only; OpenBLAS would repack its 51864 x 384
  // weight (80 MB in float32) on every step.
  proj_out_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  // Tied to embed_tokens: save_pretrained leaves it out of model.safetensors.
  proj_out_->redeclare_parameter("weight", {config.vocab_size, config.d_model}, DType::kF32,
                                 DTypePolicy::kFloating, /*required=*/false);
}

void WhisperModel::load(const TensorSource& source) {
  load_state_dict(source);
  tie_output_head();
}

void WhisperModel::tie_output_head() {
  if (proj_out_->slot("weight").value.defined()) return;
  // The same tensor (shared storage), as HF ties the two parameters.
  proj_out_->set_param("weight", decoder_->embed_tokens().param("weight"));
}

Tensor WhisperModel::encode(const Tensor& mel) const {
  return encoder_->forward(mel);
}

WhisperModel::CrossKv WhisperModel::cross_kv(const Tensor& encoder_out) const {
  OASR_CHECK(
      encoder_out.defined() && encoder_out.dim() == 3 && encoder_out.size(2) == config_.d_model,
      kInvalidArgument, "Whisper cross_kv: the encoder output must be [B, frames, ",
      config_.d_model, "], got ",
      encoder_out.defined() ? shape_str(encoder_out.shape()) : std::string("undefined"));
  CrossKv cross;
  // fp8: each (frame, head) vector as e4m3 codes and a power-of-two scale,
  // computed once per utterance, in the layout the served tensors have.
  const auto store = [&](Tensor x, std::vector<Tensor>& data, std::vector<Tensor>& scales) {
    if (!fp8_kv_cache_) {
      data.push_back(std::move(x));
      return;
    }
    const int64_t head_dim = x.size(3);
    ops::Pow2E4m3 q =
        ops::quantize_pow2_e4m3(x.contiguous().view({x.numel() / head_dim, head_dim}));
    data.push_back(q.codes.view(x.shape()));
    scales.push_back(q.scales.view({x.size(0), x.size(1), x.size(2), 1}));
  };
  for (const auto& layer : decoder_->layers()) {
    auto [keys, values] = layer->encoder_attn().project_memory(encoder_out);
    store(std::move(keys), cross.keys, cross.key_scales);
    store(std::move(values), cross.values, cross.value_scales);
  }
  return cross;
}

layers::AttentionMemory WhisperModel::CrossKv::layer(size_t l) const {
  layers::AttentionMemory memory{keys.at(l), values.at(l), Tensor(), Tensor()};
  if (!key_scales.empty()) {
    memory.key_scales = key_scales.at(l);
    memory.value_scales = value_scales.at(l);
  }
  return memory;
}

layers::KvCache WhisperModel::make_cache(int64_t rows, int64_t capacity_tokens) const {
  OASR_CHECK(capacity_tokens > 0 && capacity_tokens <= config_.max_target_positions,
             kInvalidArgument, "Whisper KV cache: capacity_tokens must be in 1..",
             config_.max_target_positions, " (max_target_positions), got ", capacity_tokens);
  layers::KvCache::Layout layout;
  layout.layers = config_.decoder_layers;
  layout.heads = config_.decoder_attention_heads;
  layout.head_dim = config_.d_model / config_.decoder_attention_heads;
  layout.rows = rows;
  layout.capacity_tokens = capacity_tokens;
  // Stored as the decoder computes: the served dtype on the served device.
  const Tensor& weight = decoder_->embed_tokens().param("weight");
  layout.dtype = weight.dtype();
  layout.device = weight.device();
  layout.fp8 = fp8_kv_cache_;
  return layers::KvCache(layout);
}

Tensor WhisperModel::decode(const Tensor& tokens, const CrossKv& cross,
                            std::span<const int64_t> cross_rows, layers::KvCache& cache,
                            const WhisperDeviceStep& device) const {
  OASR_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.size(1) > 0 &&
                 (tokens.dtype() == DType::kI64 || tokens.dtype() == DType::kI32),
             kInvalidArgument, "Whisper decode: tokens must be int64 [rows, n] with n >= 1, got ",
             tokens.defined() ? tokens.str() : std::string("undefined"));
  OASR_CHECK(tokens.size(0) == cache.rows(), kInvalidArgument, "Whisper decode: ", tokens.size(0),
             " token rows for a KV cache of ", cache.rows(), " rows");
  const int64_t layers = config_.decoder_layers;
  const bool fp8_cross = !cross.key_scales.empty();
  OASR_CHECK(static_cast<int64_t>(cross.keys.size()) == layers &&
                 static_cast<int64_t>(cross.values.size()) == layers &&
                 (!fp8_cross || (static_cast<int64_t>(cross.key_scales.size()) == layers &&
                                 static_cast<int64_t>(cross.value_scales.size()) == layers)),
             kInvalidArgument, "Whisper decode: cross holds ", cross.keys.size(), " key and ",
             cross.values.size(), " value tensors for ", layers,
             " decoder layers; compute it with cross_kv()");
  const layers::KvCache::Layout& layout = cache.layout();
  OASR_CHECK(layout.layers == layers && layout.heads == config_.decoder_attention_heads &&
                 layout.head_dim == config_.d_model / config_.decoder_attention_heads,
             kInvalidArgument, "Whisper decode: the KV cache's layout (", layout.layers,
             " layers, ", layout.heads, " heads of ", layout.head_dim,
             ") is not this model's; create it with make_cache()");
  cache.rollback();  // a step starts from the committed tokens only
  try {
    std::vector<layers::AttentionMemory> memory;
    for (int64_t l = 0; l < layers; ++l) memory.push_back(cross.layer(static_cast<size_t>(l)));
    const Tensor hidden = decoder_->forward(tokens, memory, cross_rows, cache, device);
    Tensor logits = proj_out_->forward(hidden);
    cache.commit();
    return logits;
  } catch (...) {
    cache.rollback();
    throw;
  }
}

}  // namespace oasr::models
