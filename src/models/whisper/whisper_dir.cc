// Whisper directories in Hugging Face layout: config, generation settings,
// tokenizer files and weights.
#include "models/whisper/whisper_dir.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "layers/checkpoint_source.h"
#include "models/hf_dir.h"
#include "models/native_dir.h"
#include "models/whisper/whisper_convert.h"

namespace oasr::models {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kEmbedTokens = "model.decoder.embed_tokens.weight";
constexpr const char* kProjOut = "proj_out.weight";
constexpr int64_t kFirstMultilingualVocab = 51865;  // OpenAI: is_multilingual = n_vocab >= 51865
constexpr int64_t kSpaceToken = 220;                // "Ġ" in Whisper's byte-level BPE

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// A TensorSource that serves another under other names: the exposed list
// decides which names exist (hiding a tied copy, adding HF's prefix).
class RenamedTensorSource final : public TensorSource {
 public:
  RenamedTensorSource(std::shared_ptr<const TensorSource> base,
                      std::vector<std::pair<std::string, std::string>> exposed_to_base)
      : base_(std::move(base)), order_(std::move(exposed_to_base)) {
    for (const auto& [exposed, original] : order_) map_.emplace(exposed, original);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(order_.size());
    for (const auto& entry : order_) out.push_back(entry.first);
    return out;
  }
  bool contains(const std::string& name) const override { return map_.count(name) > 0; }
  DType dtype(const std::string& name) const override { return base_->dtype(base(name)); }
  Shape shape(const std::string& name) const override { return base_->shape(base(name)); }
  Tensor get(const std::string& name) const override { return base_->get(base(name)); }

 private:
  const std::string& base(const std::string& name) const {
    const auto it = map_.find(name);
    OASR_CHECK(it != map_.end(), kNotFound, "no tensor named ", name);
    return it->second;
  }
  std::shared_ptr<const TensorSource> base_;
  std::vector<std::pair<std::string, std::string>> order_;
  std::map<std::string, std::string> map_;
};

std::shared_ptr<const TensorSource> torch_source(const std::vector<fs::path>& files,
                                                 std::vector<std::string>& notes) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const fs::path& file : files) {
    io::TorchStateDict state = io::load_torch_state_dict(file);
    for (const std::string& line : state.converted) notes.push_back(line);
    for (auto& entry : state.tensors) tensors.push_back(std::move(entry));
  }
  return std::make_shared<OrderedTensorSource>(std::move(tensors));
}

// pytorch_model.bin.index.json: {"weight_map": {name: shard}}; each shard once.
std::vector<fs::path> torch_shards(const fs::path& index_path) {
  const json index = io::read_json_file(index_path);
  OASR_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
             kCorruptFile, index_path.string(), ": lacks the object \"weight_map\"");
  std::vector<fs::path> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    OASR_CHECK(shard.is_string(), kCorruptFile, index_path.string(), ": weight_map[\"", name,
               "\"] is not a file name");
    const fs::path path = index_path.parent_path() / shard.get<std::string>();
    if (std::find(shards.begin(), shards.end(), path) == shards.end()) {
      OASR_CHECK(is_file(path), kNotFound, index_path.string(), ": the shard ", path.string(),
                 " it lists is missing");
      shards.push_back(path);
    }
  }
  OASR_CHECK(!shards.empty(), kCorruptFile, index_path.string(), ": weight_map is empty");
  return shards;
}

std::shared_ptr<const TensorSource> open_weights(const fs::path& dir, WhisperSource& source) {
  if (is_file(dir / "model.safetensors") || is_file(dir / "model.safetensors.index.json")) {
    source.weights_path = is_file(dir / "model.safetensors") ? dir / "model.safetensors"
                                                             : dir / "model.safetensors.index.json";
    return std::make_shared<CheckpointTensorSource>(io::SafeTensorsCheckpoint::open(dir));
  }
  if (is_file(dir / "pytorch_model.bin")) {
    source.weights_path = dir / "pytorch_model.bin";
    return torch_source({source.weights_path}, source.notes);
  }
  if (is_file(dir / "pytorch_model.bin.index.json")) {
    source.weights_path = dir / "pytorch_model.bin.index.json";
    return torch_source(torch_shards(source.weights_path), source.notes);
  }
  std::string other;
  for (const char* name : {"tf_model.h5", "flax_model.msgpack", "model.bin"}) {
    if (is_file(dir / name)) other = name;
  }
  OASR_THROW(kNotFound, dir.string(),
             ": no weights; looked for model.safetensors, model.safetensors.index.json, "
             "pytorch_model.bin and pytorch_model.bin.index.json",
             other.empty() ? std::string(". Download or copy the weights into the directory")
             : other == "model.bin"
                 ? ". It holds a CTranslate2 model.bin: convert it with `oasr convert --from "
                   "ct2 SRC DST`"
                 : ". It holds " + other +
                       " (TensorFlow / Flax): load it with transformers and save_pretrained() "
                       "it as PyTorch/safetensors");
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous();
  const Tensor cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// Hides a tied proj_out copy and adds "model." to bare WhisperModel names.
std::shared_ptr<const TensorSource> normalise_names(std::shared_ptr<const TensorSource> weights,
                                                    WhisperSource& source) {
  const std::vector<std::string> names = weights->names();
  bool has_prefix = false;
  for (const std::string& name : names) has_prefix |= name.rfind("model.", 0) == 0;
  const std::string add = has_prefix ? "" : "model.";
  if (!has_prefix) {
    source.notes.push_back(
        "tensor names lack HF's \"model.\" prefix (saved from a bare WhisperModel); added");
  }
  bool hide_proj_out = false;
  if (weights->contains(kProjOut)) {
    const std::string embed = has_prefix ? kEmbedTokens : std::string(kEmbedTokens).substr(6);
    OASR_CHECK(weights->contains(embed), kCorruptFile, source.weights_path.string(),
               ": holds proj_out.weight but not ", kEmbedTokens);
    OASR_CHECK(same_bytes(weights->get(kProjOut), weights->get(embed)), kUnsupported,
               source.weights_path.string(), ": proj_out.weight differs from ", kEmbedTokens,
               " (an untied output projection); oasr's Whisper ties the two, as every released "
               "Whisper does");
    hide_proj_out = true;
    source.notes.push_back("proj_out.weight is the tied copy of " + std::string(kEmbedTokens) +
                           "; not loaded separately");
  }
  if (has_prefix && !hide_proj_out) return weights;
  std::vector<std::pair<std::string, std::string>> exposed;
  for (const std::string& name : names) {
    if (name == kProjOut) continue;
    exposed.emplace_back(add + name, name);
  }
  return std::make_shared<RenamedTensorSource>(std::move(weights), std::move(exposed));
}

void locate_tokenizer(const fs::path& dir, WhisperSource& source) {
  if (is_file(dir / "tokenizer.json")) {
    source.tokenizer_json = dir / "tokenizer.json";
    return;
  }
  OASR_CHECK(is_file(dir / "vocab.json") && is_file(dir / "merges.txt"), kNotFound, dir.string(),
             ": no tokenizer; looked for tokenizer.json and for vocab.json + merges.txt (copy "
             "the tokenizer files of the checkpoint's HF repository, e.g. openai/whisper-<size>, "
             "into the directory)");
  source.vocab_json = dir / "vocab.json";
  source.merges_txt = dir / "merges.txt";
  if (is_file(dir / "added_tokens.json")) source.added_tokens_json = dir / "added_tokens.json";
}

bool is_special_spelling(const std::string& token) {
  return token.size() > 4 && token.rfind("<|", 0) == 0 &&
         token.compare(token.size() - 2, 2, "|>") == 0;
}

void add_token(std::map<std::string, int64_t>& out, const std::string& token, const json& id,
               const fs::path& file) {
  OASR_CHECK(id.is_number_integer(), kCorruptFile, file.string(), ": the id of \"", token,
             "\" is not an integer: ", id.dump());
  out[token] = id.get<int64_t>();
}

// ---- generation settings -----------------------------------------------------

// The value of `key` in the first document that has it (null counts as
// absent), with the file it came from.
struct Found {
  const json* value = nullptr;
  const char* file = "";
};

Found look_up(const char* key, const json* generation, const json& config) {
  if (generation != nullptr && generation->contains(key) && !generation->at(key).is_null()) {
    return {&generation->at(key), "generation_config.json"};
  }
  if (config.contains(key) && !config.at(key).is_null()) return {&config.at(key), "config.json"};
  return {};
}

int64_t token_id(const Found& found, const char* key, const std::string& dir_label) {
  const json* value = found.value;
  // HF allows a list of end tokens; Whisper's first is <|endoftext|>.
  if (value->is_array() && !value->empty()) value = &value->at(0);
  OASR_CHECK(value->is_number_integer(), kCorruptFile, dir_label, "/", found.file, ": \"", key,
             "\" must be a token id, not ", found.value->dump());
  return value->get<int64_t>();
}

std::vector<int64_t> id_list(const Found& found, const char* key, const std::string& dir_label) {
  OASR_CHECK(found.value->is_array(), kCorruptFile, dir_label, "/", found.file, ": \"", key,
             "\" must be a list of token ids, not ", found.value->dump());
  std::vector<int64_t> out;
  for (const json& id : *found.value) {
    OASR_CHECK(id.is_number_integer(), kCorruptFile, dir_label, "/", found.file, ": \"", key,
               "\" holds ", id.dump(), ", which is not a token id");
    out.push_back(id.get<int64_t>());
  }
  return out;
}

// oasr_config.json, where the directory has one (oasr convert and oasr
// quantize write it): the architecture must be Whisper's; format_version 2
// carries the quantization spec of a quantized checkpoint, and only it does.
void read_oasr_config(const fs::path& dir, WhisperSource& source) {
  const fs::path path = dir / kNativeConfigName;
  if (!is_file(path)) return;
  const std::string what = path.string();
  const json document = io::read_json_file(path);
  OASR_CHECK(document.is_object(), kCorruptFile, what, ": is not a JSON object");
  const auto text = [&](const char* key) {
    const auto it = document.find(key);
    OASR_CHECK(it != document.end() && it->is_string(), kCorruptFile, what, ": \"", key,
               "\" must be a string");
    return it->get<std::string>();
  };
  const std::string architecture = text("architecture");
  OASR_CHECK(architecture == kWhisperArchitectureName, kCorruptFile, what, ": architecture '",
             architecture,
             "' beside a Whisper config.json; a Whisper "
             "directory's oasr_config.json says \"",
             kWhisperArchitectureName, "\"");
  const auto version = document.find("format_version");
  OASR_CHECK(version != document.end() && version->is_number_integer() &&
                 (version->get<int64_t>() == 1 || version->get<int64_t>() == 2),
             kUnsupported, what, ": format_version ",
             version == document.end() ? std::string("is missing") : version->dump(),
             "; this oasr reads 1 (full precision) and 2 (quantized by oasr quantize)");
  const bool quantized = version->get<int64_t>() == 2;
  const auto spec = document.find("quantization");
  OASR_CHECK((spec != document.end()) == quantized, kCorruptFile, what,
             quantized ? ": format_version 2 (a quantized checkpoint) needs a \"quantization\" "
                         "spec, and this one has none"
                       : ": a \"quantization\" spec needs format_version 2, found 1");
  if (quantized) {
    OASR_CHECK(spec->is_object(), kCorruptFile, what, ": \"quantization\" must be an object");
    source.quantization = *spec;
  }
  if (const auto from = document.find("converted_from");
      from != document.end() && from->is_string()) {
    source.converted_from = from->get<std::string>();
  }
}

}  // namespace

bool is_whisper_dir(const fs::path& dir) {
  return whisper_dir_rejection(dir).empty();
}

std::string whisper_dir_rejection(const fs::path& dir) {
  return hf_model_type_rejection(dir, "whisper");
}

std::map<std::string, int64_t> read_whisper_special_tokens(const WhisperSource& files) {
  std::map<std::string, int64_t> out;
  if (!files.tokenizer_json.empty()) {
    const json tokenizer = io::read_json_file(files.tokenizer_json);
    OASR_CHECK(tokenizer.is_object(), kCorruptFile, files.tokenizer_json.string(),
               ": is not a JSON object");
    if (tokenizer.contains("model") && tokenizer["model"].contains("vocab") &&
        tokenizer["model"]["vocab"].is_object()) {
      for (const auto& [token, id] : tokenizer["model"]["vocab"].items()) {
        if (is_special_spelling(token)) add_token(out, token, id, files.tokenizer_json);
      }
    }
    if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
      for (const json& entry : tokenizer["added_tokens"]) {
        OASR_CHECK(entry.is_object() && entry.contains("content") && entry.contains("id") &&
                       entry["content"].is_string(),
                   kCorruptFile, files.tokenizer_json.string(),
                   ": an added_tokens entry lacks \"content\" or \"id\": ", entry.dump());
        add_token(out, entry["content"].get<std::string>(), entry["id"], files.tokenizer_json);
      }
    }
    return out;
  }
  if (!files.vocab_json.empty()) {
    const json vocab = io::read_json_file(files.vocab_json);
    OASR_CHECK(vocab.is_object(), kCorruptFile, files.vocab_json.string(),
               ": is not a JSON object of token -> id");
    for (const auto& [token, id] : vocab.items()) {
      if (is_special_spelling(token)) add_token(out, token, id, files.vocab_json);
    }
    const fs::path tokenizer_config = files.vocab_json.parent_path() / "tokenizer_config.json";
    if (is_file(tokenizer_config)) {
      const json document = io::read_json_file(tokenizer_config);
      if (document.is_object() && document.contains("added_tokens_decoder") &&
          document["added_tokens_decoder"].is_object()) {
        for (const auto& [id, entry] : document["added_tokens_decoder"].items()) {
          if (!entry.is_object() || !entry.contains("content")) continue;
          char* end = nullptr;
          const long long value = std::strtoll(id.c_str(), &end, 10);
          OASR_CHECK(!id.empty() && *end == '\0', kCorruptFile, tokenizer_config.string(),
                     ": added_tokens_decoder key \"", id, "\" is not a token id");
          OASR_CHECK(entry["content"].is_string(), kCorruptFile, tokenizer_config.string(),
                     ": added_tokens_decoder[\"", id, "\"].content must be a string, got ",
                     entry["content"].dump());
          out[entry["content"].get<std::string>()] = value;
        }
      }
    }
  }
  if (!files.added_tokens_json.empty()) {
    const json added = io::read_json_file(files.added_tokens_json);
    OASR_CHECK(added.is_object(), kCorruptFile, files.added_tokens_json.string(),
               ": is not a JSON object of token -> id");
    for (const auto& [token, id] : added.items())
      add_token(out, token, id, files.added_tokens_json);
  }
  return out;
}

WhisperGeneration resolve_whisper_generation(const json* generation, const json& config,
                                             const std::map<std::string, int64_t>& special,
                                             const WhisperConfig& network,
                                             const std::string& dir_label,
                                             std::vector<std::string>& notes) {
  OASR_CHECK(generation == nullptr || generation->is_object(), kCorruptFile, dir_label,
             "/generation_config.json: is not a JSON object");
  auto from_tokenizer = [&](const char* token) -> std::optional<int64_t> {
    const auto it = special.find(token);
    if (it == special.end()) return std::nullopt;
    return it->second;
  };
  // A required id: the documents first, then the tokenizer's token.
  auto required_id = [&](const char* key, const char* token) {
    const Found found = look_up(key, generation, config);
    if (found.value != nullptr) return token_id(found, key, dir_label);
    const std::optional<int64_t> id = token == nullptr ? std::nullopt : from_tokenizer(token);
    OASR_CHECK(
        id.has_value(), kCorruptFile, dir_label, ": \"", key,
        "\" is in neither generation_config.json nor config.json",
        token == nullptr ? std::string() : std::string(", and the tokenizer has no ") + token,
        "; add it to generation_config.json (HF's openai/whisper-<size> has it)");
    return *id;
  };

  WhisperGeneration out;
  out.decoder_start_token_id = required_id("decoder_start_token_id", "<|startoftranscript|>");
  out.eos_token_id = required_id("eos_token_id", "<|endoftext|>");
  const Found pad = look_up("pad_token_id", generation, config);
  out.pad_token_id =
      pad.value != nullptr ? token_id(pad, "pad_token_id", dir_label) : out.eos_token_id;
  if (const Found bos = look_up("bos_token_id", generation, config); bos.value != nullptr) {
    out.bos_token_id = token_id(bos, "bos_token_id", dir_label);
  }
  // Only the generation config carries these; config.json never did.
  const json empty = json::object();
  const json& gen = generation != nullptr ? *generation : empty;
  const Found no_timestamps = look_up("no_timestamps_token_id", &gen, empty);
  if (no_timestamps.value != nullptr) {
    out.no_timestamps_token_id = token_id(no_timestamps, "no_timestamps_token_id", dir_label);
  } else {
    const std::optional<int64_t> id = from_tokenizer("<|notimestamps|>");
    OASR_CHECK(id.has_value(), kCorruptFile, dir_label,
               ": \"no_timestamps_token_id\" is not in generation_config.json and the tokenizer "
               "has no <|notimestamps|>; add it to generation_config.json");
    out.no_timestamps_token_id = *id;
  }
  if (const Found found = look_up("is_multilingual", &gen, empty); found.value != nullptr) {
    OASR_CHECK(found.value->is_boolean(), kCorruptFile, dir_label,
               "/generation_config.json: \"is_multilingual\" must be true or false");
    out.is_multilingual = found.value->get<bool>();
  } else {
    out.is_multilingual = network.vocab_size >= kFirstMultilingualVocab;
    notes.push_back(std::string("is_multilingual not given; ") +
                    (out.is_multilingual ? "true" : "false") + " from vocab_size " +
                    std::to_string(network.vocab_size));
  }
  if (out.is_multilingual) {
    if (const Found found = look_up("lang_to_id", &gen, empty); found.value != nullptr) {
      OASR_CHECK(found.value->is_object(), kCorruptFile, dir_label,
                 "/generation_config.json: \"lang_to_id\" must be an object");
      for (const auto& [token, id] : found.value->items()) {
        OASR_CHECK(id.is_number_integer(), kCorruptFile, dir_label,
                   "/generation_config.json: lang_to_id[\"", token, "\"] is not a token id");
        out.lang_to_id[token] = id.get<int64_t>();
      }
    } else {
      // Whisper's language tokens sit between these two.
      const std::optional<int64_t> translate = from_tokenizer("<|translate|>");
      OASR_CHECK(translate.has_value(), kCorruptFile, dir_label,
                 ": a multilingual model without lang_to_id in generation_config.json, and the "
                 "tokenizer has no <|translate|> to find the language tokens by; add lang_to_id");
      for (const auto& [token, id] : special) {
        if (id > out.decoder_start_token_id && id < *translate) out.lang_to_id[token] = id;
      }
      notes.push_back("lang_to_id not given; " + std::to_string(out.lang_to_id.size()) +
                      " language tokens taken from the tokenizer");
    }
    const Found tasks = look_up("task_to_id", &gen, empty);
    for (const auto& [task, token, slot] :
         {std::tuple{"transcribe", "<|transcribe|>", &out.transcribe_token_id},
          std::tuple{"translate", "<|translate|>", &out.translate_token_id}}) {
      if (tasks.value != nullptr && tasks.value->is_object() && tasks.value->contains(task)) {
        const json& id = tasks.value->at(task);
        OASR_CHECK(id.is_number_integer(), kCorruptFile, dir_label,
                   "/generation_config.json: task_to_id[\"", task, "\"] is not a token id");
        *slot = id.get<int64_t>();
      } else {
        *slot = from_tokenizer(token);
      }
      OASR_CHECK(slot->has_value(), kCorruptFile, dir_label,
                 ": a multilingual model, but neither generation_config.json's task_to_id nor the "
                 "tokenizer gives ",
                 token, "; add task_to_id to generation_config.json");
    }
  }
  if (const Found found = look_up("suppress_tokens", generation, config); found.value) {
    out.suppress_tokens = id_list(found, "suppress_tokens", dir_label);
  } else {
    notes.push_back("suppress_tokens not given; none suppressed");
  }
  if (const Found found = look_up("begin_suppress_tokens", generation, config); found.value) {
    out.begin_suppress_tokens = id_list(found, "begin_suppress_tokens", dir_label);
  } else {
    out.begin_suppress_tokens = {kSpaceToken, out.eos_token_id};
    notes.push_back("begin_suppress_tokens not given; [220, eos] as HF's WhisperConfig default");
  }
  if (const Found found = look_up("max_length", generation, config); found.value) {
    OASR_CHECK(found.value->is_number_integer() && found.value->get<int64_t>() > 0, kCorruptFile,
               dir_label, "/", found.file, ": \"max_length\" must be a positive integer, not ",
               found.value->dump());
    out.max_length = found.value->get<int64_t>();
  } else {
    out.max_length = network.max_target_positions;
  }
  if (const Found found = look_up("alignment_heads", &gen, empty); found.value) {
    OASR_CHECK(found.value->is_array(), kCorruptFile, dir_label,
               "/generation_config.json: \"alignment_heads\" must be a list of [layer, head]");
    for (const json& pair : *found.value) {
      OASR_CHECK(pair.is_array() && pair.size() == 2 && pair[0].is_number_integer() &&
                     pair[1].is_number_integer(),
                 kCorruptFile, dir_label, "/generation_config.json: alignment_heads holds ",
                 pair.dump(), ", not [layer, head]");
      out.alignment_heads.emplace_back(pair[0].get<int64_t>(), pair[1].get<int64_t>());
    }
  }
  if (const Found found = look_up("max_initial_timestamp_index", &gen, empty); found.value) {
    // HF reads it with getattr(..., None): null means no limit.
    if (!found.value->is_null()) {
      OASR_CHECK(found.value->is_number_integer() && found.value->get<int64_t>() >= 0, kCorruptFile,
                 dir_label,
                 "/generation_config.json: \"max_initial_timestamp_index\" must be a "
                 "non-negative integer or null, not ",
                 found.value->dump());
      out.max_initial_timestamp_index = found.value->get<int64_t>();
    }
  }
  if (const Found found = look_up("prev_sot_token_id", &gen, empty); found.value) {
    out.prev_sot_token_id = token_id(found, "prev_sot_token_id", dir_label);
  } else {
    out.prev_sot_token_id = from_tokenizer("<|startofprev|>");
  }

  // Every id must name a row of the embedding.
  auto check_id = [&](const std::string& what, int64_t id) {
    OASR_CHECK(id >= 0 && id < network.vocab_size, kCorruptFile, dir_label, ": ", what, " ", id,
               " is outside the vocabulary (vocab_size ", network.vocab_size,
               "); the generation settings belong to another model");
  };
  check_id("decoder_start_token_id", out.decoder_start_token_id);
  check_id("eos_token_id", out.eos_token_id);
  check_id("pad_token_id", out.pad_token_id);
  check_id("no_timestamps_token_id", out.no_timestamps_token_id);
  if (out.transcribe_token_id) check_id("task_to_id transcribe", *out.transcribe_token_id);
  if (out.translate_token_id) check_id("task_to_id translate", *out.translate_token_id);
  for (const auto& [token, id] : out.lang_to_id) check_id("lang_to_id " + token, id);
  for (int64_t id : out.suppress_tokens) check_id("suppress_tokens entry", id);
  for (int64_t id : out.begin_suppress_tokens) check_id("begin_suppress_tokens entry", id);
  for (const auto& [layer, head] : out.alignment_heads) {
    OASR_CHECK(layer >= 0 && layer < network.decoder_layers && head >= 0 &&
                   head < network.decoder_attention_heads,
               kCorruptFile, dir_label, ": alignment_heads names layer ", layer, " head ", head,
               ", outside the decoder's ", network.decoder_layers, " layers x ",
               network.decoder_attention_heads, " heads");
  }
  return out;
}

WhisperSource load_whisper_dir(const fs::path& dir) {
  std::error_code error;
  OASR_CHECK(fs::is_directory(dir, error), kNotFound, dir.string(), ": no such directory");
  const fs::path config_path = dir / "config.json";
  OASR_CHECK(is_file(config_path), kNotFound, dir.string(),
             ": no config.json, so not a Hugging Face Whisper directory (a CTranslate2 / "
             "faster-whisper directory holds model.bin: convert it with `oasr convert --from ct2 "
             "SRC DST`)");
  const json config = io::read_json_file(config_path);
  OASR_CHECK(config.is_object(), kCorruptFile, config_path.string(), ": is not a JSON object");
  OASR_CHECK(!(is_file(dir / "model.bin") && config.contains("suppress_ids")), kUnsupported,
             dir.string(),
             ": is a CTranslate2 (faster-whisper) directory; convert it with `oasr convert "
             "--from ct2 SRC DST`");
  OASR_CHECK(config.contains("model_type"), kCorruptFile, config_path.string(),
             ": lacks \"model_type\"; a Whisper config.json says \"model_type\": \"whisper\"");

  WhisperSource source;
  source.dir = dir;
  source.config = WhisperConfig::from_hf_json(config, config_path.string());
  locate_tokenizer(dir, source);
  const fs::path generation_path = dir / "generation_config.json";
  json generation;
  const bool has_generation = is_file(generation_path);
  if (has_generation) {
    generation = io::read_json_file(generation_path);
  } else {
    source.notes.push_back("no generation_config.json; settings from config.json and tokenizer");
  }
  source.generation = resolve_whisper_generation(has_generation ? &generation : nullptr, config,
                                                 read_whisper_special_tokens(source), source.config,
                                                 dir.string(), source.notes);
  read_oasr_config(dir, source);
  source.weights = normalise_names(open_weights(dir, source), source);
  return source;
}

}  // namespace oasr::models
