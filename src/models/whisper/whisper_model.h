// WhisperModel: Hugging Face's WhisperForConditionalGeneration at inference,
// as a Module tree whose parameter paths are exactly its state-dict names
// ("model.encoder.conv1.weight", "model.decoder.layers.0.encoder_attn.k_proj.weight",
// "proj_out.weight"), so an HF model.safetensors loads strictly:
//
//   WhisperModel model(source.config);
//   model.load(*source.weights);                    // ties proj_out to embed_tokens
//   Tensor enc = model.encode(mel);                 // [B, n_mels, 3000] -> [B, 1500, d]
//   auto cross = model.cross_kv(enc);               // once per utterance
//   layers::KvCache cache = model.make_cache(rows, 448);
//   Tensor logits = model.decode(prompt, cross, cross_rows, cache);  // [R, n, vocab]
//   ... then one token per row per step; cache.reorder_rows() after a beam step.
//
// Encoder: gelu(conv1) (k 3, pad 1), gelu(conv2) (k 3, stride 2, pad 1),
// + embed_positions (stored, sinusoidal in the checkpoints), pre-LN blocks,
// layer_norm. Decoder: embed_tokens + learned embed_positions (at the cache's
// positions), pre-LN blocks (causal self-attention over the KV cache,
// cross-attention over cross_kv()), layer_norm, proj_out (tied head).
// Served in float32 on the CPU, or float16 / bfloat16 / float32 on CUDA
// (the log-mel and the token ids move to the device; the KV cache is kept
// there in the served dtype). GELU is the exact (erf) one, HF's "gelu".
//
// HF 4.46 builds embed_scale from scale_embedding but never applies it, so
// neither does this model (every released Whisper has scale_embedding false).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "layers/conv.h"
#include "layers/conv1d.h"
#include "layers/kv_cache.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "models/whisper/whisper_blocks.h"
#include "models/whisper/whisper_config.h"

namespace oasr::models {

class WhisperEncoder : public Module {
 public:
  explicit WhisperEncoder(const WhisperConfig& config);
  Tensor forward(const Tensor& mel) const;  // [B, n_mels, 2 * max_source_positions] -> [B, T, d]

 private:
  WhisperEncoderTrunk trunk_;  // conv1, conv2, embed_positions, layers
  std::shared_ptr<layers::LayerNorm> layer_norm_;
};

class WhisperDecoder : public Module {
 public:
  explicit WhisperDecoder(const WhisperConfig& config);

  const layers::Embedding& embed_tokens() const { return *embed_tokens_; }
  const std::vector<std::shared_ptr<WhisperDecoderLayer>>& layers() const { return layers_; }

  // The final hidden states [R, n, d] (before the head) of tokens [R, n]
  // at positions cache.length() .. + n - 1; appends to the cache but leaves
  // the commit to the caller.
  Tensor forward(const Tensor& tokens, const std::vector<layers::AttentionMemory>& cross,
                 std::span<const int64_t> cross_rows, layers::KvCache& cache,
                 const WhisperDeviceStep& device = {}) const;

 private:
  WhisperConfig config_;
  std::shared_ptr<layers::Embedding> embed_tokens_;
  std::shared_ptr<layers::Embedding> embed_positions_;
  std::vector<std::shared_ptr<WhisperDecoderLayer>> layers_;
  std::shared_ptr<layers::LayerNorm> layer_norm_;
};

class WhisperModel : public Module {
 public:
  // Validates the dimensions (kInvalidArgument naming the field).
  explicit WhisperModel(const WhisperConfig& config);

  const WhisperConfig& config() const { return config_; }

  // Strict load of HF state-dict names. proj_out.weight is optional (HF's
  // save_pretrained drops a tied weight); when absent the head shares
  // model.decoder.embed_tokens.weight.
  void load(const TensorSource& source);
  // Points proj_out at embed_tokens when no head weight was loaded (load()
  // calls this; for code that fills the slots by other means).
  void tie_output_head();

  // mel float32 [B, num_mel_bins, 2 * max_source_positions] (3000 frames:
  // one 30 s window, as WhisperFeatureExtractor pads it) -> [B, 1500, d].
  Tensor encode(const Tensor& mel) const;

  // Cross-attention keys and values of every decoder layer, each
  // [B, heads, frames, head_dim]: computed once per utterance. Under the fp8
  // KV cache they are stored as e4m3 codes with one power-of-two scale per
  // (frame, head), scales [B, heads, frames, 1] (ops/kv_fp8.h); empty
  // scales otherwise.
  struct CrossKv {
    std::vector<Tensor> keys, values;
    std::vector<Tensor> key_scales, value_scales;
    layers::AttentionMemory layer(size_t l) const;
  };
  CrossKv cross_kv(const Tensor& encoder_out) const;

  // A self-attention cache for `rows` hypotheses of at most capacity_tokens
  // tokens each (at most max_target_positions: the learned positions end there).
  layers::KvCache make_cache(int64_t rows, int64_t capacity_tokens) const;
  // Caches made afterwards store the self-attention keys and values in fp8
  // (quantization kv_cache=fp8_e4m3; layers/kv_cache.h), and cross_kv()
  // stores the cross-attention's in fp8 too.
  void set_fp8_kv_cache(bool on) { fp8_kv_cache_ = on; }
  bool fp8_kv_cache() const { return fp8_kv_cache_; }

  // tokens int64 [R, n] (R = cache.rows()); row r attends encoder row
  // cross_rows[r]; the tokens take positions cache.length() .. + n - 1 and are
  // appended to the cache (committed on success; a failed call leaves the
  // cache as it was). Returns logits [R, n, vocab_size] in the served dtype
  // on the served device. `device` (whisper_blocks.h): the position and
  // cross rows as the kernels read them on the device, for a step recorded as
  // a device graph (its past_tokens must hold cache.length()).
  Tensor decode(const Tensor& tokens, const CrossKv& cross, std::span<const int64_t> cross_rows,
                layers::KvCache& cache, const WhisperDeviceStep& device = {}) const;

  const WhisperEncoder& encoder() const { return *encoder_; }
  const WhisperDecoder& decoder() const { return *decoder_; }

 private:
  WhisperConfig config_;
  std::shared_ptr<WhisperEncoder> encoder_;
  std::shared_ptr<WhisperDecoder> decoder_;
  std::shared_ptr<layers::Linear> proj_out_;
  bool fp8_kv_cache_ = false;
};

}  // namespace oasr::models
