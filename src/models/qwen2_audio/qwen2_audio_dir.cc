#include "models/qwen2_audio/qwen2_audio_dir.h"

#include <system_error>

#include "core/error.h"
#include "decode/byte_bpe_tokenizer.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "layers/checkpoint_source.h"
#include "models/hf_dir.h"

namespace oasr::models {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// One id or a list of ids.
std::vector<int64_t> token_ids(const json& value, const std::string& what) {
  std::vector<int64_t> ids;
  if (value.is_number_integer()) {
    ids.push_back(value.get<int64_t>());
  } else {
    OASR_CHECK(value.is_array() && !value.empty(), kCorruptFile, what,
               " must be a token id or a list of token ids, not ", value.dump());
    for (const json& id : value) {
      OASR_CHECK(id.is_number_integer(), kCorruptFile, what, " holds ", id.dump(),
                 ", not a token id");
      ids.push_back(id.get<int64_t>());
    }
  }
  return ids;
}

// The framing oasr's log-mel computes (audio/whisper_mel.h), field by field.
void check_preprocessor(const fs::path& path, const Qwen2AudioConfig& config) {
  OASR_CHECK(is_file(path), kNotFound, path.string(),
             " (the processor's WhisperFeatureExtractor settings) is missing; copy it from the "
             "model's repository (Qwen2AudioProcessor.save_pretrained writes it)");
  const json pre = io::read_json_file(path);
  OASR_CHECK(pre.is_object(), kCorruptFile, path.string(), " is not a JSON object");
  const auto expect = [&](const char* key, int64_t served) {
    if (!pre.contains(key)) return;
    const json& value = pre.at(key);
    OASR_CHECK(value.is_number_integer() && value.get<int64_t>() == served, kUnsupported,
               path.string(), ": ", key, " is ", value.dump(), "; oasr computes Whisper's log-mel ",
               "with ", key, " ", served, " for this model");
  };
  if (pre.contains("feature_extractor_type")) {
    OASR_CHECK(pre.at("feature_extractor_type") == "WhisperFeatureExtractor", kUnsupported,
               path.string(), ": feature_extractor_type is ",
               pre.at("feature_extractor_type").dump(),
               "; Qwen2-Audio's processor uses WhisperFeatureExtractor");
  }
  expect("feature_size", config.audio.num_mel_bins);
  expect("sampling_rate", 16000);
  expect("hop_length", 160);
  expect("n_fft", 400);
  expect("chunk_length", 30);
  expect("nb_max_frames", 2 * config.audio.max_source_positions);
}

}  // namespace

std::string qwen2_audio_dir_rejection(const fs::path& dir) {
  return hf_model_type_rejection(dir, kQwen2AudioArchitectureName);
}

bool is_qwen2_audio_dir(const fs::path& dir) {
  return qwen2_audio_dir_rejection(dir).empty();
}

Qwen2AudioSource load_qwen2_audio_dir(const fs::path& dir) {
  const std::string rejection = qwen2_audio_dir_rejection(dir);
  OASR_CHECK(rejection.empty(), kNotFound, dir.string(),
             " is not a Qwen2-Audio directory: ", rejection);
  Qwen2AudioSource source;
  source.dir = dir;
  const fs::path config_path = dir / "config.json";
  const json config = io::read_json_file(config_path);
  source.config = Qwen2AudioConfig::from_hf_json(config, config_path.string());

  OASR_CHECK(is_file(dir / "model.safetensors") || is_file(dir / "model.safetensors.index.json"),
             kNotFound, dir.string(),
             ": no weights; looked for model.safetensors and model.safetensors.index.json "
             "(save_pretrained's shards). Download or copy the weights into the directory");
  source.weights_path = is_file(dir / "model.safetensors") ? dir / "model.safetensors"
                                                           : dir / "model.safetensors.index.json";
  source.weights = std::make_shared<CheckpointTensorSource>(io::SafeTensorsCheckpoint::open(dir));

  source.tokenizer_path = dir / "tokenizer.json";
  OASR_CHECK(is_file(source.tokenizer_path), kNotFound, source.tokenizer_path.string(),
             " is missing; Qwen2-Audio is served with its fast tokenizer's file (the "
             "processor's save_pretrained writes it)");
  check_preprocessor(dir / "preprocessor_config.json", source.config);

  const fs::path generation_path = dir / "generation_config.json";
  const std::optional<json> generation = io::read_json_file_if_present(generation_path);
  const int64_t vocab = source.config.text.vocab_size;
  if (generation && generation->contains("eos_token_id") &&
      !generation->at("eos_token_id").is_null()) {
    source.generation.eos_token_ids =
        token_ids(generation->at("eos_token_id"), generation_path.string() + " eos_token_id");
  } else if (config.contains("text_config") && config["text_config"].is_object() &&
             config["text_config"].contains("eos_token_id") &&
             !config["text_config"]["eos_token_id"].is_null()) {
    source.generation.eos_token_ids = token_ids(config["text_config"]["eos_token_id"],
                                                config_path.string() + " text_config.eos_token_id");
  } else {
    const auto tokenizer =
        decode::ByteLevelBpeTokenizer::from_tokenizer_json(source.tokenizer_path);
    const std::optional<int64_t> end = tokenizer.token_to_id("<|endoftext|>");
    OASR_CHECK(end.has_value(), kCorruptFile, dir.string(),
               ": no end-of-sequence token: generation_config.json and config.json name no "
               "eos_token_id and tokenizer.json has no <|endoftext|>; add eos_token_id to "
               "generation_config.json");
    source.generation.eos_token_ids = {*end};
  }
  for (const int64_t id : source.generation.eos_token_ids) {
    OASR_CHECK(id >= 0 && id < vocab, kCorruptFile, dir.string(), ": eos_token_id ", id,
               " lies outside the vocabulary of ", vocab, " tokens");
  }
  if (generation && generation->contains("max_new_tokens") &&
      !generation->at("max_new_tokens").is_null()) {
    const json& value = generation->at("max_new_tokens");
    OASR_CHECK(value.is_number_integer() && value.get<int64_t>() > 0, kCorruptFile,
               generation_path.string(), ": max_new_tokens must be a positive integer, not ",
               value.dump());
    source.generation.max_new_tokens = value.get<int64_t>();
  }
  return source;
}

}  // namespace oasr::models
