// Qwen2AudioModel: Hugging Face's Qwen2AudioForConditionalGeneration at
// inference, as a Module tree whose parameter paths are its state-dict names
// ("audio_tower.layers.0.self_attn.q_proj.weight",
// "multi_modal_projector.linear.weight",
// "language_model.model.layers.0.mlp.gate_proj.weight",
// "language_model.lm_head.weight"), so the sharded model-*.safetensors of a
// save_pretrained directory load strictly, with no conversion:
//
//   Qwen2AudioModel model(source.config);
//   model.load(*source.weights);
//   std::vector<Tensor> audio = model.encode_audio(mel, frames);  // per utterance
//   Tensor embeds = model.embed_prompt(ids, audio[b]);            // placeholders filled
//   layers::PagedKvCache cache = model.make_cache(blocks);
//   auto seq = cache.open();
//   Tensor logits = model.forward(embeds.unsqueeze(0), {seq}, cache);  // [1, vocab], last place
//   logits = model.step(next_tokens, sequences, cache);           // one token per sequence
//
// The audio tower (Qwen2AudioEncoder) is Whisper's encoder on 128 mel bins
// with a key mask for the frames past an utterance's end (HF builds it from
// feature_attention_mask), then AvgPool1d(2, 2) over time and its
// layer_norm: 3000 mel frames -> 750 audio tokens, of which the first
// output_length(frames) are the utterance's. multi_modal_projector.linear
// maps them to the LM's width; they replace the prompt's <|AUDIO|> tokens
// (expanded to one per audio token) in order. The LM is Qwen2
// (qwen2_blocks.h) with its final RMSNorm and lm_head (tied to embed_tokens
// when tie_word_embeddings says so).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "layers/paged_kv_cache.h"
#include "models/qwen2_audio/qwen2_audio_config.h"
#include "models/qwen2_audio/qwen2_blocks.h"
#include "models/whisper_encoder_layer.h"

namespace oasr::models {

class Qwen2AudioEncoder : public Module {
 public:
  explicit Qwen2AudioEncoder(const Qwen2AudioEncoderConfig& config);

  // HF's _get_feat_extract_output_lengths: frames after conv2, and audio
  // tokens after the pooling, of an utterance of `mel_frames` valid frames.
  static int64_t conv_length(int64_t mel_frames) { return (mel_frames - 1) / 2 + 1; }
  static int64_t output_length(int64_t mel_frames) { return (conv_length(mel_frames) - 2) / 2 + 1; }

  // mel float32 [B, num_mel_bins, 2 * max_source_positions] (one 30 s
  // window as WhisperFeatureExtractor pads it); mel_frames[b]: the valid
  // frames of row b (1 .. 2 * max_source_positions) -> [B,
  // max_source_positions / 2, d_model]; row b's first output_length(mel_frames[b])
  // positions are its audio tokens.
  Tensor forward(const Tensor& mel, std::span<const int64_t> mel_frames) const;

 private:
  Qwen2AudioEncoderConfig config_;
  WhisperEncoderTrunk trunk_;  // conv1, conv2, embed_positions, layers
  std::shared_ptr<layers::LayerNorm> layer_norm_;
};

class Qwen2AudioModel : public Module {
 public:
  // Validates the configuration (kInvalidArgument naming the field).
  explicit Qwen2AudioModel(const Qwen2AudioConfig& config);

  const Qwen2AudioConfig& config() const { return config_; }

  // Strict load of HF's state-dict names. language_model.lm_head.weight is
  // optional only when tie_word_embeddings is true (it then shares
  // embed_tokens); the inverse frequencies of RoPE are computed, not read.
  void load(const TensorSource& source);
  // Points lm_head at embed_tokens when no head weight was loaded (load()
  // calls this; the shared load sequence calls it after its strict load).
  void tie_output_head();

  // Caches made afterwards store keys and values as e4m3 with one
  // power-of-two scale per (token, head) (quantization kv_cache=fp8_e4m3;
  // layers/kv_cache.h).
  void set_fp8_kv_cache(bool on) { fp8_kv_cache_ = on; }
  bool fp8_kv_cache() const { return fp8_kv_cache_; }

  // The projected audio tokens of each utterance, [output_length(frames[b]),
  // hidden_size] in the served dtype on the served device.
  std::vector<Tensor> encode_audio(const Tensor& mel, std::span<const int64_t> mel_frames) const;

  // The LM's input embeddings [n, hidden_size] of prompt `ids`, whose
  // audio_token_index entries (as many as `audio` has rows: the processor's
  // expansion) take the rows of `audio` in order. A count that differs is
  // refused, naming both counts.
  Tensor embed_prompt(std::span<const int64_t> ids, const Tensor& audio) const;

  // The LM's paged cache: `blocks` blocks of block_size tokens, the served
  // dtype (or e4m3 with set_fp8_kv_cache) on the served device.
  layers::PagedKvCache make_cache(int64_t blocks, int64_t block_size = 16) const;

  // embeds [S, n, hidden_size]: n new tokens for each of `sequences` (open
  // in `cache`), at places length .. length + n - 1 of each; returns the
  // logits of each last place [S, vocab_size] and commits the tokens (a
  // failed call leaves the cache as it was). Refuses a sequence that would
  // pass max_position_embeddings.
  using SequenceId = layers::PagedKvCache::SequenceId;
  Tensor forward(const Tensor& embeds, std::span<const SequenceId> sequences,
                 layers::PagedKvCache& cache) const;
  // One new token per sequence (int64 [S]): its logits [S, vocab_size].
  Tensor step(const Tensor& tokens, std::span<const SequenceId> sequences,
              layers::PagedKvCache& cache) const;

 private:
  Qwen2AudioConfig config_;
  std::shared_ptr<Qwen2AudioEncoder> audio_tower_;
  std::shared_ptr<layers::Linear> projector_;
  std::shared_ptr<layers::Embedding> embed_tokens_;
  std::vector<std::shared_ptr<Qwen2DecoderLayer>> layers_;
  std::shared_ptr<layers::RmsNorm> norm_;
  std::shared_ptr<layers::Linear> lm_head_;
  Tensor inv_freq_;  // float32 [head_dim / 2] on the CPU; moved per call
  bool fp8_kv_cache_ = false;
};

}  // namespace oasr::models
