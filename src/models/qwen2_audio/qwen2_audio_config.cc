#include "models/qwen2_audio/qwen2_audio_config.h"

#include <type_traits>

#include "core/error.h"

namespace oasr::models {
namespace {

using json = nlohmann::json;

// The optional field `key` of `object` into `out` (HF's default stays when
// absent or null): an integer, a number or a boolean as `out` is.
template <class T>
void read_field(const json& object, const char* key, T& out, const std::string& what) {
  if (!object.contains(key) || object.at(key).is_null()) return;
  const json& value = object.at(key);
  bool fits = false;
  const char* kind = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    fits = value.is_boolean();
    kind = "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    fits = value.is_number_integer();
    kind = "an integer";
  } else {
    fits = value.is_number();
    kind = "a number";
  }
  OASR_CHECK(fits, kCorruptFile, what, ": \"", key, "\" must be ", kind, ", not ", value.dump());
  out = value.get<T>();
}

// A string field that, when present, must equal the one value oasr builds.
void expect_string(const json& object, const char* key, const char* served, const std::string& what,
                   const char* why) {
  if (!object.contains(key) || object.at(key).is_null()) return;
  const json& value = object.at(key);
  OASR_CHECK(value.is_string() && value.get<std::string>() == served, kUnsupported, what, ": \"",
             key, "\" is ", value.dump(), "; oasr serves \"", served, "\" only (", why, ")");
}

const json& section(const json& config, const char* key, const std::string& what) {
  static const json empty = json::object();
  if (!config.contains(key) || config.at(key).is_null()) return empty;
  const json& value = config.at(key);
  OASR_CHECK(value.is_object(), kCorruptFile, what, ": \"", key, "\" must be an object, not ",
             value.dump());
  return value;
}

void check_positive(int64_t value, const char* field, const std::string& what) {
  OASR_CHECK(value > 0, kInvalidArgument, what, ": ", field, " must be positive, got ", value);
}

}  // namespace

Qwen2AudioConfig Qwen2AudioConfig::from_hf_json(const json& config, const std::string& what) {
  OASR_CHECK(config.is_object(), kCorruptFile, what, ": is not a JSON object");
  OASR_CHECK(
      config.contains("model_type") && config.at("model_type") == kQwen2AudioArchitectureName,
      kUnsupported, what, ": model_type is ",
      config.contains("model_type") ? config.at("model_type").dump() : "missing",
      ", not \"qwen2_audio\"; this reader loads Qwen2-Audio checkpoints only");
  Qwen2AudioConfig out;
  read_field(config, "audio_token_index", out.audio_token_index, what);

  const std::string audio_what = what + " audio_config";
  const json& audio = section(config, "audio_config", what);
  expect_string(audio, "model_type", "qwen2_audio_encoder", audio_what,
                "the audio tower Qwen2-Audio's checkpoints carry");
  expect_string(audio, "activation_function", "gelu", audio_what,
                "the exact erf GELU of the published tower");
  read_field(audio, "num_mel_bins", out.audio.num_mel_bins, audio_what);
  read_field(audio, "d_model", out.audio.d_model, audio_what);
  read_field(audio, "encoder_layers", out.audio.encoder_layers, audio_what);
  read_field(audio, "encoder_attention_heads", out.audio.encoder_attention_heads, audio_what);
  read_field(audio, "encoder_ffn_dim", out.audio.encoder_ffn_dim, audio_what);
  read_field(audio, "max_source_positions", out.audio.max_source_positions, audio_what);
  bool scale_embedding = false;
  read_field(audio, "scale_embedding", scale_embedding, audio_what);
  OASR_CHECK(!scale_embedding, kUnsupported, audio_what,
             ": scale_embedding is true; Qwen2-Audio's tower never scales its input (HF builds "
             "the factor and does not apply it), so a checkpoint asking for it is not one oasr "
             "can reproduce");

  const std::string text_what = what + " text_config";
  const json& text = section(config, "text_config", what);
  expect_string(text, "model_type", "qwen2", text_what, "Qwen2-Audio's language model is Qwen2");
  expect_string(text, "hidden_act", "silu", text_what, "the SwiGLU MLP of Qwen2");
  read_field(text, "vocab_size", out.text.vocab_size, text_what);
  read_field(text, "hidden_size", out.text.hidden_size, text_what);
  read_field(text, "intermediate_size", out.text.intermediate_size, text_what);
  read_field(text, "num_hidden_layers", out.text.num_hidden_layers, text_what);
  read_field(text, "num_attention_heads", out.text.num_attention_heads, text_what);
  out.text.num_key_value_heads = out.text.num_attention_heads;  // HF's rule for null
  if (text.contains("num_key_value_heads") && !text.at("num_key_value_heads").is_null()) {
    read_field(text, "num_key_value_heads", out.text.num_key_value_heads, text_what);
  } else if (!text.contains("num_key_value_heads")) {
    out.text.num_key_value_heads = 32;  // Qwen2Config's default when the key is absent
  }
  read_field(text, "max_position_embeddings", out.text.max_position_embeddings, text_what);
  read_field(text, "rms_norm_eps", out.text.rms_norm_eps, text_what);
  read_field(text, "rope_theta", out.text.rope_theta, text_what);
  read_field(text, "tie_word_embeddings", out.text.tie_word_embeddings, text_what);
  OASR_CHECK(!text.contains("rope_scaling") || text.at("rope_scaling").is_null(), kUnsupported,
             text_what, ": rope_scaling is ",
             text.contains("rope_scaling") ? text.at("rope_scaling").dump() : "",
             "; oasr applies Qwen2's default RoPE only (Qwen2-Audio's checkpoints set none)");
  bool sliding = false;
  read_field(text, "use_sliding_window", sliding, text_what);
  OASR_CHECK(!sliding, kUnsupported, text_what,
             ": use_sliding_window is true; oasr's Qwen2 attends the whole context (as "
             "Qwen2-Audio's checkpoints do)");
  out.validate(what);
  return out;
}

void Qwen2AudioConfig::validate(const std::string& what) const {
  check_positive(audio.num_mel_bins, "audio_config.num_mel_bins", what);
  check_positive(audio.d_model, "audio_config.d_model", what);
  check_positive(audio.encoder_layers, "audio_config.encoder_layers", what);
  check_positive(audio.encoder_attention_heads, "audio_config.encoder_attention_heads", what);
  check_positive(audio.encoder_ffn_dim, "audio_config.encoder_ffn_dim", what);
  check_positive(audio.max_source_positions, "audio_config.max_source_positions", what);
  OASR_CHECK(audio.d_model % audio.encoder_attention_heads == 0, kInvalidArgument, what,
             ": audio_config.d_model ", audio.d_model, " is not a multiple of ",
             "encoder_attention_heads ", audio.encoder_attention_heads);
  OASR_CHECK(audio.max_source_positions % 2 == 0, kInvalidArgument, what,
             ": audio_config.max_source_positions ", audio.max_source_positions,
             " must be even (the tower's average pooling halves it)");
  check_positive(text.vocab_size, "text_config.vocab_size", what);
  check_positive(text.hidden_size, "text_config.hidden_size", what);
  check_positive(text.intermediate_size, "text_config.intermediate_size", what);
  check_positive(text.num_hidden_layers, "text_config.num_hidden_layers", what);
  check_positive(text.num_attention_heads, "text_config.num_attention_heads", what);
  check_positive(text.num_key_value_heads, "text_config.num_key_value_heads", what);
  check_positive(text.max_position_embeddings, "text_config.max_position_embeddings", what);
  OASR_CHECK(text.hidden_size % text.num_attention_heads == 0, kInvalidArgument, what,
             ": text_config.hidden_size ", text.hidden_size, " is not a multiple of ",
             "num_attention_heads ", text.num_attention_heads);
  OASR_CHECK(text.num_attention_heads % text.num_key_value_heads == 0, kInvalidArgument, what,
             ": text_config.num_attention_heads ", text.num_attention_heads,
             " is not a multiple of num_key_value_heads ", text.num_key_value_heads);
  OASR_CHECK(text.head_dim() % 2 == 0, kInvalidArgument, what, ": the LM's head_dim ",
             text.head_dim(), " is odd; RoPE rotates pairs of dimensions");
  OASR_CHECK(text.rms_norm_eps > 0 && text.rope_theta > 0, kInvalidArgument, what,
             ": text_config.rms_norm_eps and rope_theta must be positive");
  OASR_CHECK(audio_token_index >= 0 && audio_token_index < text.vocab_size, kInvalidArgument, what,
             ": audio_token_index ", audio_token_index, " lies outside the vocabulary of ",
             text.vocab_size, " tokens");
}

}  // namespace oasr::models
