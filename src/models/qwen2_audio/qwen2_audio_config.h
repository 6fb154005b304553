// Qwen2-Audio's configuration as Hugging Face's Qwen2AudioConfig reads a
// config.json (model_type "qwen2_audio"): the audio tower's
// Qwen2AudioEncoderConfig under "audio_config", the language model's
// Qwen2Config under "text_config", and audio_token_index. save_pretrained
// writes only the fields that differ from the class defaults, so a field
// that is absent takes HF's default (listed below with each field); a field
// that is present must have the right type.
//
// Refused by name (kUnsupported), because the model oasr builds would differ:
// an activation other than HF's "gelu" (tower) / "silu" (LM), rope_scaling,
// use_sliding_window true, and a hidden size that the heads do not divide.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace oasr::models {

inline constexpr const char* kQwen2AudioArchitectureName = "qwen2_audio";

struct Qwen2AudioEncoderConfig {
  int64_t num_mel_bins = 128;
  int64_t d_model = 1280;
  int64_t encoder_layers = 32;
  int64_t encoder_attention_heads = 20;
  int64_t encoder_ffn_dim = 5120;
  int64_t max_source_positions = 1500;  // frames after conv2; the mel input is twice that
};

struct Qwen2TextConfig {
  int64_t vocab_size = 151936;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 22016;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  // null in the file: num_attention_heads
  int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

struct Qwen2AudioConfig {
  Qwen2AudioEncoderConfig audio;
  Qwen2TextConfig text;
  int64_t audio_token_index = 151646;

  // Parses HF's config.json object; `what` names the file in messages.
  static Qwen2AudioConfig from_hf_json(const nlohmann::json& config, const std::string& what);
  // Positive sizes, heads dividing the widths, the key/value heads dividing
  // the query heads, an even head_dim (RoPE rotates pairs), the audio token
  // inside the vocabulary (kInvalidArgument naming the field).
  void validate(const std::string& what) const;
};

}  // namespace oasr::models
