// HF WhisperConfig reading and the HF documents the converter writes.
#include "models/whisper/whisper_config.h"

#include "core/error.h"

namespace oasr::models {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// The activations HF's Whisper accepts (ACT2FN names) that oasr does not
// implement are refused by name; this is the one it implements.
constexpr const char* kGelu = "gelu";

int64_t required_int(const json& config, const char* key, const std::string& what) {
  OASR_CHECK(config.contains(key), kCorruptFile, what, ": lacks \"", key,
             "\"; a Whisper config.json names every size of the network (write the value of the "
             "checkpoint's Hugging Face config, e.g. from openai/whisper-<size>)");
  const json& value = config.at(key);
  OASR_CHECK(value.is_number_integer(), kCorruptFile, what, ": \"", key,
             "\" must be an integer, not ", value.dump());
  return value.get<int64_t>();
}

}  // namespace

WhisperConfig WhisperConfig::from_hf_json(const json& config, const std::string& what) {
  OASR_CHECK(config.is_object(), kCorruptFile, what, ": is not a JSON object");
  if (config.contains("model_type")) {
    const json& type = config.at("model_type");
    OASR_CHECK(type.is_string() && type.get<std::string>() == "whisper", kUnsupported, what,
               ": model_type is ", type.dump(),
               ", not \"whisper\"; this reader loads Whisper checkpoints only");
  }
  WhisperConfig out;
  out.num_mel_bins = required_int(config, "num_mel_bins", what);
  out.d_model = required_int(config, "d_model", what);
  out.encoder_layers = required_int(config, "encoder_layers", what);
  out.encoder_attention_heads = required_int(config, "encoder_attention_heads", what);
  out.decoder_layers = required_int(config, "decoder_layers", what);
  out.decoder_attention_heads = required_int(config, "decoder_attention_heads", what);
  out.encoder_ffn_dim = required_int(config, "encoder_ffn_dim", what);
  out.decoder_ffn_dim = required_int(config, "decoder_ffn_dim", what);
  out.vocab_size = required_int(config, "vocab_size", what);
  out.max_source_positions = required_int(config, "max_source_positions", what);
  out.max_target_positions = required_int(config, "max_target_positions", what);
  if (config.contains("activation_function")) {
    const json& value = config.at("activation_function");
    OASR_CHECK(value.is_string(), kCorruptFile, what,
               ": \"activation_function\" must be a string, not ", value.dump());
    out.activation_function = value.get<std::string>();
  }
  if (config.contains("scale_embedding")) {
    const json& value = config.at("scale_embedding");
    OASR_CHECK(value.is_boolean(), kCorruptFile, what,
               ": \"scale_embedding\" must be true or false, not ", value.dump());
    out.scale_embedding = value.get<bool>();
  }
  // HF ties proj_out to embed_tokens unless told otherwise; an untied head
  // is a different model from the one oasr builds.
  if (config.contains("tie_word_embeddings")) {
    const json& value = config.at("tie_word_embeddings");
    OASR_CHECK(value.is_boolean(), kCorruptFile, what,
               ": \"tie_word_embeddings\" must be true or false, not ", value.dump());
    OASR_CHECK(value.get<bool>(), kUnsupported, what,
               ": tie_word_embeddings is false (a separate output projection); oasr's Whisper "
               "ties proj_out to model.decoder.embed_tokens as every released Whisper does");
  }
  out.validate(what);
  return out;
}

void WhisperConfig::validate(const std::string& what) const {
  const std::pair<const char*, int64_t> sizes[] = {
      {"num_mel_bins", num_mel_bins},
      {"d_model", d_model},
      {"encoder_layers", encoder_layers},
      {"encoder_attention_heads", encoder_attention_heads},
      {"decoder_layers", decoder_layers},
      {"decoder_attention_heads", decoder_attention_heads},
      {"encoder_ffn_dim", encoder_ffn_dim},
      {"decoder_ffn_dim", decoder_ffn_dim},
      {"vocab_size", vocab_size},
      {"max_source_positions", max_source_positions},
      {"max_target_positions", max_target_positions},
  };
  for (const auto& [key, value] : sizes) {
    OASR_CHECK(value > 0, kInvalidArgument, what, ": ", key, " is ", value,
               "; it must be positive");
  }
  OASR_CHECK(d_model % encoder_attention_heads == 0, kInvalidArgument, what, ": d_model ", d_model,
             " is not a multiple of encoder_attention_heads ", encoder_attention_heads);
  OASR_CHECK(d_model % decoder_attention_heads == 0, kInvalidArgument, what, ": d_model ", d_model,
             " is not a multiple of decoder_attention_heads ", decoder_attention_heads);
  OASR_CHECK(activation_function == kGelu, kUnsupported, what, ": activation_function \"",
             activation_function,
             "\" is not supported; oasr's Whisper implements \"gelu\" (the erf GELU every "
             "released Whisper uses)");
}

ordered_json WhisperGeneration::forced_decoder_ids_json() const {
  ordered_json ids = ordered_json::array();
  if (is_multilingual) {
    // Position 1 is the language: null lets generate() detect it.
    ids.push_back(ordered_json::array({1, nullptr}));
    if (transcribe_token_id) ids.push_back(ordered_json::array({2, *transcribe_token_id}));
  } else {
    ids.push_back(ordered_json::array({1, no_timestamps_token_id}));
  }
  return ids;
}

ordered_json WhisperGeneration::to_hf_json() const {
  ordered_json out;
  if (!alignment_heads.empty()) {
    ordered_json heads = ordered_json::array();
    for (const auto& [layer, head] : alignment_heads) heads.push_back({layer, head});
    out["alignment_heads"] = heads;
  }
  out["begin_suppress_tokens"] = begin_suppress_tokens;
  out["bos_token_id"] = bos_token_id.value_or(eos_token_id);
  out["decoder_start_token_id"] = decoder_start_token_id;
  out["eos_token_id"] = eos_token_id;
  out["forced_decoder_ids"] = forced_decoder_ids_json();
  out["is_multilingual"] = is_multilingual;
  if (is_multilingual) {
    ordered_json languages = ordered_json::object();
    for (const auto& [token, id] : lang_to_id) languages[token] = id;
    out["lang_to_id"] = languages;
  }
  // Where the source did not say: OpenAI's transcribe() default
  // (max_initial_timestamp 1.0 s, 20 ms steps), as HF's checkpoints write it.
  out["max_initial_timestamp_index"] = max_initial_timestamp_index.value_or(50);
  out["max_length"] = max_length;
  out["no_timestamps_token_id"] = no_timestamps_token_id;
  out["pad_token_id"] = pad_token_id;
  if (prev_sot_token_id) out["prev_sot_token_id"] = *prev_sot_token_id;
  out["return_timestamps"] = false;
  out["suppress_tokens"] = suppress_tokens;
  if (is_multilingual && transcribe_token_id && translate_token_id) {
    out["task_to_id"] = {{"transcribe", *transcribe_token_id}, {"translate", *translate_token_id}};
  }
  return out;
}

ordered_json whisper_hf_config_json(const WhisperConfig& config,
                                    const WhisperGeneration& generation,
                                    const std::string& torch_dtype) {
  // Keys sorted as transformers writes them; training-only fields at the
  // values of HF's inference checkpoints (no dropout, no SpecAugment).
  ordered_json out;
  out["activation_dropout"] = 0.0;
  out["activation_function"] = config.activation_function;
  out["apply_spec_augment"] = false;
  out["architectures"] = {"WhisperForConditionalGeneration"};
  out["attention_dropout"] = 0.0;
  out["begin_suppress_tokens"] = generation.begin_suppress_tokens;
  out["bos_token_id"] = generation.bos_token_id.value_or(generation.eos_token_id);
  out["classifier_proj_size"] = 256;
  out["d_model"] = config.d_model;
  out["decoder_attention_heads"] = config.decoder_attention_heads;
  out["decoder_ffn_dim"] = config.decoder_ffn_dim;
  out["decoder_layerdrop"] = 0.0;
  out["decoder_layers"] = config.decoder_layers;
  out["decoder_start_token_id"] = generation.decoder_start_token_id;
  out["dropout"] = 0.0;
  out["encoder_attention_heads"] = config.encoder_attention_heads;
  out["encoder_ffn_dim"] = config.encoder_ffn_dim;
  out["encoder_layerdrop"] = 0.0;
  out["encoder_layers"] = config.encoder_layers;
  out["eos_token_id"] = generation.eos_token_id;
  out["init_std"] = 0.02;
  out["is_encoder_decoder"] = true;
  out["mask_feature_length"] = 10;
  out["mask_feature_min_masks"] = 0;
  out["mask_feature_prob"] = 0.0;
  out["mask_time_length"] = 10;
  out["mask_time_min_masks"] = 2;
  out["mask_time_prob"] = 0.05;
  out["max_length"] = generation.max_length;
  out["max_source_positions"] = config.max_source_positions;
  out["max_target_positions"] = config.max_target_positions;
  out["median_filter_width"] = 7;
  out["model_type"] = "whisper";
  out["num_hidden_layers"] = config.encoder_layers;
  out["num_mel_bins"] = config.num_mel_bins;
  out["pad_token_id"] = generation.pad_token_id;
  out["scale_embedding"] = config.scale_embedding;
  out["suppress_tokens"] = generation.suppress_tokens;
  out["torch_dtype"] = torch_dtype;
  out["use_cache"] = true;
  out["use_weighted_layer_sum"] = false;
  out["vocab_size"] = config.vocab_size;
  return out;
}

}  // namespace oasr::models
