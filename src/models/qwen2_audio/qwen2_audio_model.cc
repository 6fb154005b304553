#include "models/qwen2_audio/qwen2_audio_model.h"

#include <string>

#include "core/error.h"
#include "ops/concat.h"
#include "ops/elementwise.h"
#include "ops/rotary_embedding.h"

namespace oasr::models {
namespace {

std::shared_ptr<Module> container(const char* type_name) {
  return std::make_shared<Module>(type_name);
}

}  // namespace

Qwen2AudioEncoder::Qwen2AudioEncoder(const Qwen2AudioEncoderConfig& config)
    : Module("Qwen2AudioEncoder"), config_(config) {
  trunk_ = WhisperEncoderTrunk(
      *this, {config.num_mel_bins, config.d_model, config.encoder_layers,
              config.encoder_attention_heads, config.encoder_ffn_dim, config.max_source_positions});
  layer_norm_ = register_module("layer_norm", std::make_shared<layers::LayerNorm>(config.d_model));
}

Tensor Qwen2AudioEncoder::forward(const Tensor& mel, std::span<const int64_t> mel_frames) const {
  constexpr const char* kWhat = "Qwen2-Audio audio tower";
  trunk_.check_input(mel, kWhat);
  const int64_t frames = 2 * config_.max_source_positions;
  const int64_t batch = mel.size(0);
  OASR_CHECK(static_cast<int64_t>(mel_frames.size()) == batch, kInvalidArgument,
             "Qwen2-Audio audio tower: ", mel_frames.size(), " frame counts for a batch of ",
             batch);
  const int64_t positions = config_.max_source_positions;
  // Keys past an utterance's conv2 length are masked for every query (HF's
  // additive -inf mask built from feature_attention_mask).
  std::vector<uint8_t> keep(static_cast<size_t>(batch * positions), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t valid = mel_frames[static_cast<size_t>(b)];
    OASR_CHECK(valid >= 1 && valid <= frames, kInvalidArgument, "Qwen2-Audio audio tower: row ", b,
               " has ", valid, " valid mel frames; 1 .. ", frames, " fit a 30 s window");
    for (int64_t t = 0; t < conv_length(valid); ++t)
      keep[static_cast<size_t>(b * positions + t)] = 1;
  }
  const Tensor key_mask =
      Tensor::from_vector(keep, {batch, 1, 1, positions}).to(trunk_.position_table().device());
  const Tensor hidden = trunk_.forward(mel, key_mask, kWhat);
  // AvgPool1d(2, stride 2) over time: (even + odd) / 2, as PyTorch sums the
  // window and divides by its size.
  const Tensor pairs = hidden.view({batch, positions / 2, 2, config_.d_model});
  const Tensor pooled =
      ops::scale(ops::add(pairs.select(2, 0).contiguous(), pairs.select(2, 1).contiguous()), 0.5f);
  return layer_norm_->forward(pooled);
}

Qwen2AudioModel::Qwen2AudioModel(const Qwen2AudioConfig& config)
    : Module("Qwen2AudioForConditionalGeneration"), config_(config) {
  config.validate("Qwen2-Audio config");
  const Qwen2TextConfig& text = config.text;
  audio_tower_ = register_module("audio_tower", std::make_shared<Qwen2AudioEncoder>(config.audio));
  auto projector =
      register_module("multi_modal_projector", container("Qwen2AudioMultiModalProjector"));
  projector_ = projector->register_module(
      "linear", std::make_shared<layers::Linear>(config.audio.d_model, text.hidden_size, true));
  auto language_model = register_module("language_model", container("Qwen2ForCausalLM"));
  auto model = language_model->register_module("model", container("Qwen2Model"));
  embed_tokens_ = model->register_module(
      "embed_tokens", std::make_shared<layers::Embedding>(text.vocab_size, text.hidden_size));
  auto list = model->register_module("layers", container("ModuleList"));
  for (int64_t i = 0; i < text.num_hidden_layers; ++i) {
    layers_.push_back(
        list->register_module(std::to_string(i), std::make_shared<Qwen2DecoderLayer>(text)));
  }
  norm_ = model->register_module(
      "norm",
      std::make_shared<layers::RmsNorm>(text.hidden_size, static_cast<float>(text.rms_norm_eps)));
  lm_head_ = language_model->register_module(
      "lm_head", std::make_shared<layers::Linear>(text.hidden_size, text.vocab_size, false));
  if (text.tie_word_embeddings) {
    // save_pretrained leaves a tied head out of the checkpoint.
    lm_head_->redeclare_parameter("weight", {text.vocab_size, text.hidden_size}, DType::kF32,
                                  DTypePolicy::kFloating, /*required=*/false);
  }
  inv_freq_ = ops::rotary_inv_freq(text.head_dim(), static_cast<float>(text.rope_theta));
}

void Qwen2AudioModel::load(const TensorSource& source) {
  load_state_dict(source);
  tie_output_head();
}

void Qwen2AudioModel::tie_output_head() {
  if (lm_head_->slot("weight").value.defined()) return;
  // The same tensor (shared storage), as HF ties the two parameters.
  lm_head_->set_param("weight", embed_tokens_->param("weight"));
}

std::vector<Tensor> Qwen2AudioModel::encode_audio(const Tensor& mel,
                                                  std::span<const int64_t> mel_frames) const {
  const Tensor projected = projector_->forward(audio_tower_->forward(mel, mel_frames));
  std::vector<Tensor> out;
  for (size_t b = 0; b < mel_frames.size(); ++b) {
    const int64_t tokens = Qwen2AudioEncoder::output_length(mel_frames[b]);
    out.push_back(projected.select(0, static_cast<int64_t>(b)).slice(0, 0, tokens).contiguous());
  }
  return out;
}

Tensor Qwen2AudioModel::embed_prompt(std::span<const int64_t> ids, const Tensor& audio) const {
  OASR_CHECK(!ids.empty(), kInvalidArgument, "Qwen2-Audio: the prompt is empty");
  const int64_t placeholder = config_.audio_token_index;
  int64_t placeholders = 0;
  for (const int64_t id : ids) {
    OASR_CHECK(id >= 0 && id < config_.text.vocab_size, kInvalidArgument,
               "Qwen2-Audio: prompt token ", id, " lies outside the vocabulary of ",
               config_.text.vocab_size);
    placeholders += id == placeholder;
  }
  const int64_t audio_rows = audio.defined() ? audio.size(0) : 0;
  OASR_CHECK(placeholders == audio_rows, kInvalidArgument, "Qwen2-Audio: the prompt holds ",
             placeholders, " audio placeholder tokens (id ", placeholder, ") but the audio gives ",
             audio_rows, " audio tokens; expand <|AUDIO|> to one placeholder per audio token");
  const Tensor& table = embed_tokens_->param("weight");
  // Runs of text tokens embedded in one lookup each, runs of placeholders
  // taken from the audio rows in order.
  std::vector<Tensor> parts;
  int64_t used = 0;
  for (size_t start = 0; start < ids.size();) {
    const bool is_audio = ids[start] == placeholder;
    size_t end = start;
    while (end < ids.size() && (ids[end] == placeholder) == is_audio) ++end;
    const auto count = static_cast<int64_t>(end - start);
    if (is_audio) {
      parts.push_back(audio.slice(0, used, used + count).to(table.dtype()));
      used += count;
    } else {
      const std::vector<int64_t> run(ids.begin() + static_cast<std::ptrdiff_t>(start),
                                     ids.begin() + static_cast<std::ptrdiff_t>(end));
      parts.push_back(embed_tokens_->forward(Tensor::from_vector(run, {count}).to(table.device())));
    }
    start = end;
  }
  return parts.size() == 1 ? parts[0].contiguous() : ops::concat(parts, 0);
}

layers::PagedKvCache Qwen2AudioModel::make_cache(int64_t blocks, int64_t block_size) const {
  const Tensor& table = embed_tokens_->param("weight");
  layers::PagedKvCache::Layout layout;
  layout.layers = config_.text.num_hidden_layers;
  layout.heads = config_.text.num_key_value_heads;
  layout.head_dim = config_.text.head_dim();
  layout.block_size = block_size;
  layout.blocks = blocks;
  layout.dtype = table.dtype();
  layout.device = table.device();
  layout.fp8 = fp8_kv_cache_;
  return layers::PagedKvCache(layout);
}

Tensor Qwen2AudioModel::forward(const Tensor& embeds, std::span<const SequenceId> sequences,
                                layers::PagedKvCache& cache) const {
  const auto rows = static_cast<int64_t>(sequences.size());
  OASR_CHECK(embeds.defined() && embeds.dim() == 3 && embeds.size(0) == rows &&
                 embeds.size(2) == config_.text.hidden_size,
             kInvalidArgument, "Qwen2-Audio LM: the input embeddings must be [", rows, ", n, ",
             config_.text.hidden_size, "], got ",
             embeds.defined() ? embeds.str() : std::string("undefined"));
  const int64_t n = embeds.size(1);
  for (const SequenceId id : sequences) {
    OASR_CHECK(cache.length(id) + n <= config_.text.max_position_embeddings, kInvalidArgument,
               "Qwen2-Audio LM: sequence ", id, " would reach ", cache.length(id) + n,
               " tokens, past max_position_embeddings ", config_.text.max_position_embeddings);
  }
  cache.begin_step(sequences, n);
  Tensor logits;
  try {
    Qwen2Places where;
    where.positions = cache.positions();
    where.inv_freq = inv_freq_.to(embeds.device());
    Tensor hidden = embeds;
    for (size_t l = 0; l < layers_.size(); ++l) {
      hidden = layers_[l]->forward(hidden, where, cache, static_cast<int64_t>(l));
    }
    // Only the last place's logits: the next token's.
    logits = lm_head_->forward(norm_->forward(hidden.select(1, n - 1).contiguous()));
  } catch (...) {
    cache.rollback();
    throw;
  }
  cache.commit();
  return logits;
}

Tensor Qwen2AudioModel::step(const Tensor& tokens, std::span<const SequenceId> sequences,
                             layers::PagedKvCache& cache) const {
  OASR_CHECK(tokens.defined() && tokens.dim() == 1 &&
                 tokens.size(0) == static_cast<int64_t>(sequences.size()),
             kInvalidArgument, "Qwen2-Audio LM step: one token per sequence (", sequences.size(),
             "), got ", tokens.defined() ? tokens.str() : std::string("undefined"));
  const Tensor& table = embed_tokens_->param("weight");
  return forward(embed_tokens_->forward(tokens.to(DType::kI64).to(table.device()).unsqueeze(1)),
                 sequences, cache);
}

}  // namespace oasr::models
