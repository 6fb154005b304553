// Native checkpoint v1: the config document, the atomic directory writer,
// and the loader that serves native and WeNet directories alike.
#include "models/u2pp/native_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"
#include "io/posix_file.h"
#include "io/safetensors.h"
#include "io/staged_directory.h"
#include "layers/checkpoint_source.h"
#include "models/u2pp/wenet_dir.h"

namespace oasr::models {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr int kFormatVersion = 1;
// A quantized checkpoint: the same layout plus "quantization", the spec
// (quant/spec.h) that says which layer holds which 8-bit tensors.
constexpr int kQuantizedFormatVersion = 2;

// One JSON object read key by key with type checks; keys never asked for can
// be refused at the end.
class JsonSection {
 public:
  JsonSection(const json& object, std::string name, const std::string& what)
      : object_(object), name_(std::move(name)), what_(what) {
    OASR_CHECK(object_.is_object(), kCorruptFile, what_, ": \"", name_, "\" is not an object");
  }

  bool has(const std::string& key) {
    seen_.insert(key);
    return object_.contains(key);
  }
  JsonSection child(const std::string& key) {
    OASR_CHECK(has(key), kCorruptFile, what_, ": \"", field(key), "\" is missing");
    return JsonSection(object_.at(key), field(key), what_);
  }
  template <typename T>
  T get(const std::string& key) {
    OASR_CHECK(has(key), kCorruptFile, what_, ": \"", field(key), "\" is missing");
    return convert<T>(key);
  }
  template <typename T>
  T get(const std::string& key, T fallback) {
    return has(key) ? convert<T>(key) : fallback;
  }
  void reject_unknown() const {
    for (const auto& item : object_.items()) {
      OASR_CHECK(seen_.count(item.key()) > 0, kUnsupported, what_, ": unknown key \"",
                 field(item.key()), "\" (written by a newer oasr?)");
    }
  }
  std::string field(const std::string& key) const {
    return name_.empty() ? key : name_ + "." + key;
  }

 private:
  template <typename T>
  T convert(const std::string& key) const {
    const json& value = object_.at(key);
    bool ok = false;
    const char* expected = "a string";
    if constexpr (std::is_same_v<T, bool>) {
      ok = value.is_boolean();
      expected = "true or false";
    } else if constexpr (std::is_integral_v<T>) {
      ok = value.is_number_integer();
      expected = "an integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      ok = value.is_number();
      expected = "a number";
    } else {
      ok = value.is_string();
    }
    OASR_CHECK(ok, kCorruptFile, what_, ": \"", field(key), "\" must be ", expected, ", found ",
               value.dump());
    return value.get<T>();
  }

  const json& object_;
  std::string name_;
  const std::string& what_;
  std::set<std::string> seen_;
};

struct NativeConfig {
  WenetConfig config;
  std::string units_file;
  std::string bpe_model_file;  // empty unless bpe
  bool cmvn = false;
  int format_version = kFormatVersion;
  json quantization;  // format_version 2 only
};

// A file name inside the checkpoint directory: no folders, no "..".
std::string plain_file_name(const std::string& name, const std::string& field,
                            const std::string& what) {
  OASR_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
                 name.find('\\') == std::string::npos,
             kCorruptFile, what, ": \"", field,
             "\" must be a file name inside the checkpoint "
             "directory, found '",
             name, "'");
  return name;
}

// Parsers that do not know the document: their errors get its name.
template <typename F>
auto in_document(const std::string& what, F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.what());
  }
}

// JSON spelling of a float: its shortest decimal (1e-05, not 9.99999974e-06).
double shortest(float value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
  return std::strtod(std::string(buffer, end).c_str(), nullptr);
}

NativeConfig parse_native(const json& document, const std::string& what) {
  JsonSection top(document, "", what);
  NativeConfig out;
  WenetConfig& c = out.config;
  U2ppConfig& m = c.model;
  const auto version = top.get<int64_t>("format_version");
  OASR_CHECK(version == kFormatVersion || version == kQuantizedFormatVersion, kUnsupported, what,
             ": format_version ", version, " is unknown (this oasr reads ", kFormatVersion, " and ",
             kQuantizedFormatVersion, ")");
  out.format_version = static_cast<int>(version);
  const bool has_quantization = top.has("quantization");
  OASR_CHECK(has_quantization == (version == kQuantizedFormatVersion), kUnsupported, what,
             version == kQuantizedFormatVersion
                 ? ": format_version 2 (a quantized checkpoint) needs a \"quantization\" spec, "
                   "and this one has none"
                 : ": a \"quantization\" spec needs format_version 2, found 1");
  if (has_quantization) {
    out.quantization = document.at("quantization");
    OASR_CHECK(out.quantization.is_object(), kCorruptFile, what,
               ": \"quantization\" must be an object");
  }
  const auto architecture = top.get<std::string>("architecture");
  OASR_CHECK(architecture == kU2ppArchitectureName, kUnsupported, what, ": architecture '",
             architecture, "' is not supported (supported: ", kU2ppArchitectureName, ")");

  JsonSection model = top.child("model");
  m.encoder.input_dim = model.get<int64_t>("input_dim");
  m.vocab_size = model.get<int64_t>("vocab_size");
  m.blank_id = model.get<int64_t>("blank_id");
  m.sos = model.get<int64_t>("sos_id");
  m.eos = model.get<int64_t>("eos_id");
  c.ctc_weight = model.get<double>("ctc_weight");
  c.reverse_weight = model.get<double>("reverse_weight");
  JsonSection encoder = model.child("encoder");
  const std::string where = what + ": model.encoder.";
  for (const auto& [key, only] :
       {std::pair{"type", "conformer"}, std::pair{"pos_enc_layer_type", "rel_pos"},
        std::pair{"selfattention_layer_type", "rel_selfattn"}}) {
    const auto value = encoder.get<std::string>(key);
    OASR_CHECK(value == only, kUnsupported, where, key, " '", value,
               "' is not supported (supported: ", only, ")");
  }
  U2ppEncoderConfig& e = m.encoder;
  e.output_size = encoder.get<int64_t>("output_size");
  e.attention_heads = encoder.get<int64_t>("attention_heads");
  e.linear_units = encoder.get<int64_t>("linear_units");
  e.num_blocks = encoder.get<int64_t>("num_blocks");
  const auto input_layer = encoder.get<std::string>("input_layer");
  e.input_layer = in_document(what, [&] { return parse_u2pp_input_layer(input_layer); });
  e.normalize_before = encoder.get<bool>("normalize_before");
  e.macaron_style = encoder.get<bool>("macaron_style");
  e.use_cnn_module = encoder.get<bool>("use_cnn_module");
  e.cnn_module_kernel = encoder.get<int64_t>("cnn_module_kernel");
  const auto norm = encoder.get<std::string>("cnn_module_norm");
  e.cnn_module_norm = in_document(what, [&] { return parse_u2pp_conv_norm(norm); });
  e.causal = encoder.get<bool>("causal");
  e.activation = parse_wenet_activation(encoder.get<std::string>("activation_type"),
                                        where + "activation_type");
  e.static_chunk_size = encoder.get<int64_t>("static_chunk_size");
  e.use_dynamic_chunk = encoder.get<bool>("use_dynamic_chunk");
  e.query_bias = encoder.get<bool>("query_bias");
  e.key_bias = encoder.get<bool>("key_bias");
  e.value_bias = encoder.get<bool>("value_bias");
  e.conv_bias = encoder.get<bool>("conv_bias");
  e.mlp_bias = encoder.get<bool>("mlp_bias");
  e.final_norm = encoder.get<bool>("final_norm");
  e.norm_eps = static_cast<float>(encoder.get<double>("norm_eps"));
  e.conv_norm_eps = static_cast<float>(encoder.get<double>("conv_norm_eps"));
  encoder.reject_unknown();
  JsonSection decoder = model.child("decoder");
  U2ppDecoderConfig& d = m.decoder;
  const auto decoder_type = decoder.get<std::string>("type");
  d.type = in_document(what, [&] { return parse_u2pp_decoder_type(decoder_type); });
  d.attention_heads = decoder.get<int64_t>("attention_heads");
  d.linear_units = decoder.get<int64_t>("linear_units");
  d.num_blocks = decoder.get<int64_t>("num_blocks");
  d.r_num_blocks = decoder.get<int64_t>("r_num_blocks");
  d.normalize_before = decoder.get<bool>("normalize_before");
  d.activation = parse_wenet_activation(decoder.get<std::string>("activation_type"),
                                        what + ": model.decoder.activation_type");
  d.norm_eps = static_cast<float>(decoder.get<double>("norm_eps"));
  decoder.reject_unknown();
  model.reject_unknown();

  JsonSection features = top.child("features");
  OASR_CHECK(features.get<std::string>("type") == "fbank", kUnsupported, what,
             ": features.type must be fbank");
  c.fbank.sample_rate = features.get<int64_t>("sample_rate");
  c.fbank.num_mel_bins = features.get<int64_t>("num_mel_bins");
  c.fbank.frame_length_ms = features.get<double>("frame_length_ms");
  c.fbank.frame_shift_ms = features.get<double>("frame_shift_ms");
  c.fbank.dither = features.get<double>("dither");
  const auto cmvn = features.get<std::string>("cmvn");
  OASR_CHECK(cmvn == "tensors" || cmvn == "none", kCorruptFile, what,
             ": features.cmvn must be \"tensors\" or \"none\", found '", cmvn, "'");
  out.cmvn = cmvn == "tensors";
  m.encoder.global_cmvn = out.cmvn;
  features.reject_unknown();

  JsonSection tokenizer = top.child("tokenizer");
  c.tokenizer.type =
      parse_tokenizer_type(tokenizer.get<std::string>("type"), what + ": tokenizer.type");
  out.units_file = plain_file_name(tokenizer.get<std::string>("units"), "tokenizer.units", what);
  if (c.tokenizer.type == TokenizerType::kBpe) {
    out.bpe_model_file =
        plain_file_name(tokenizer.get<std::string>("bpe_model"), "tokenizer.bpe_model", what);
  }
  c.tokenizer.split_with_space = tokenizer.get<bool>("split_with_space", false);
  c.tokenizer.connect_symbol = tokenizer.get<std::string>("connect_symbol", "");
  tokenizer.reject_unknown();

  if (top.has("decode")) {
    JsonSection decode = top.child("decode");
    DecodeConfig& x = c.decode;
    x.method = decode.get<std::string>("method", x.method);
    x.beam_size = decode.get<int64_t>("beam_size", x.beam_size);
    x.ctc_weight = decode.get<double>("ctc_weight", x.ctc_weight);
    x.reverse_weight = decode.get<double>("reverse_weight", x.reverse_weight);
    x.decoding_chunk_size = decode.get<int64_t>("decoding_chunk_size", x.decoding_chunk_size);
    x.num_decoding_left_chunks =
        decode.get<int64_t>("num_decoding_left_chunks", x.num_decoding_left_chunks);
    decode.reject_unknown();
  }
  top.has("source");  // informative only
  top.reject_unknown();
  validate(c, what);
  return out;
}

// ---- files --------------------------------------------------------------------

// The files of the checkpoint, written into `dir`.
void write_contents(const ModelSource& source, const fs::path& dir,
                    const NativeWriteOptions& options) {
  io::write_file_synced(dir / kNativeConfigName, native_config_json(source).dump(2) + "\n");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : source.weights->names()) {
    Tensor tensor = source.weights->get(name);
    const bool is_cmvn = name == kCmvnMeanName || name == kCmvnIstdName;
    const bool full_precision_float = tensor.dtype() == DType::kF32 ||
                                      tensor.dtype() == DType::kF16 ||
                                      tensor.dtype() == DType::kBF16;
    if (options.weight_dtype && !is_cmvn && full_precision_float &&
        tensor.dtype() != *options.weight_dtype) {
      tensor = tensor.to(*options.weight_dtype);
    }
    tensors.emplace_back(name, std::move(tensor));
  }
  if (source.cmvn.defined()) {
    for (const auto& [name, tensor] :
         {std::pair{kCmvnMeanName, source.cmvn.mean}, std::pair{kCmvnIstdName, source.cmvn.istd}}) {
      if (!source.weights->contains(name)) tensors.emplace_back(name, tensor);
    }
  }
  io::save_safetensors(dir / kNativeWeightsName, tensors,
                       {{"format", "pt"}, {"producer", "oasr convert"}});
  std::string units;
  for (size_t id = 0; id < source.units.size(); ++id) {
    units += source.units[id] + " " + std::to_string(id) + "\n";
  }
  io::write_file_synced(dir / kNativeUnitsName, units);
  if (source.config.tokenizer.type == TokenizerType::kBpe) {
    io::write_file_synced(dir / kNativeBpeModelName, io::read_file_bytes(source.bpe_model));
  }
  for (const auto& [name, contents] : options.extra_files) {
    OASR_CHECK(!name.empty() && name.find('/') == std::string::npos && name != kNativeConfigName &&
                   name != kNativeWeightsName,
               kInvalidArgument, "save_native_checkpoint: extra file name '", name,
               "' must be a plain file name other than the checkpoint's own files");
    io::write_file_synced(dir / name, contents);
  }
  io::sync_directory(dir);
}

}  // namespace

ordered_json native_config_json(const ModelSource& source) {
  const WenetConfig& c = source.config;
  const U2ppConfig& m = c.model;
  const U2ppEncoderConfig& e = m.encoder;
  const U2ppDecoderConfig& d = m.decoder;
  ordered_json encoder = {
      {"type", "conformer"},
      {"output_size", e.output_size},
      {"attention_heads", e.attention_heads},
      {"linear_units", e.linear_units},
      {"num_blocks", e.num_blocks},
      {"input_layer", u2pp_input_layer_name(e.input_layer)},
      {"pos_enc_layer_type", "rel_pos"},
      {"selfattention_layer_type", "rel_selfattn"},
      {"normalize_before", e.normalize_before},
      {"macaron_style", e.macaron_style},
      {"use_cnn_module", e.use_cnn_module},
      {"cnn_module_kernel", e.cnn_module_kernel},
      {"cnn_module_norm", u2pp_conv_norm_name(e.cnn_module_norm)},
      {"causal", e.causal},
      {"activation_type", wenet_activation_name(e.activation)},
      {"static_chunk_size", e.static_chunk_size},
      {"use_dynamic_chunk", e.use_dynamic_chunk},
      {"query_bias", e.query_bias},
      {"key_bias", e.key_bias},
      {"value_bias", e.value_bias},
      {"conv_bias", e.conv_bias},
      {"mlp_bias", e.mlp_bias},
      {"final_norm", e.final_norm},
      {"norm_eps", shortest(e.norm_eps)},
      {"conv_norm_eps", shortest(e.conv_norm_eps)},
  };
  ordered_json decoder = {
      {"type", u2pp_decoder_type_name(d.type)},
      {"attention_heads", d.attention_heads},
      {"linear_units", d.linear_units},
      {"num_blocks", d.num_blocks},
      {"r_num_blocks", d.r_num_blocks},
      {"normalize_before", d.normalize_before},
      {"activation_type", wenet_activation_name(d.activation)},
      {"norm_eps", shortest(d.norm_eps)},
  };
  ordered_json model = {
      {"input_dim", e.input_dim},
      {"vocab_size", m.vocab_size},
      {"blank_id", m.blank_id},
      {"sos_id", m.sos_id()},
      {"eos_id", m.eos_id()},
      {"ctc_weight", c.ctc_weight},
      {"reverse_weight", c.reverse_weight},
      {"encoder", encoder},
      {"decoder", decoder},
  };
  ordered_json features = {
      {"type", "fbank"},
      {"sample_rate", c.fbank.sample_rate},
      {"num_mel_bins", c.fbank.num_mel_bins},
      {"frame_length_ms", c.fbank.frame_length_ms},
      {"frame_shift_ms", c.fbank.frame_shift_ms},
      {"dither", c.fbank.dither},
      {"cmvn", source.cmvn.defined() ? "tensors" : "none"},
  };
  ordered_json tokenizer = {{"type", tokenizer_type_name(c.tokenizer.type)},
                            {"units", kNativeUnitsName}};
  if (c.tokenizer.type == TokenizerType::kBpe) tokenizer["bpe_model"] = kNativeBpeModelName;
  tokenizer["split_with_space"] = c.tokenizer.split_with_space;
  tokenizer["connect_symbol"] = c.tokenizer.connect_symbol;
  ordered_json decode = {
      {"method", c.decode.method},
      {"beam_size", c.decode.beam_size},
      {"ctc_weight", c.decode.ctc_weight},
      {"reverse_weight", c.decode.reverse_weight},
      {"decoding_chunk_size", c.decode.decoding_chunk_size},
      {"num_decoding_left_chunks", c.decode.num_decoding_left_chunks},
  };
  ordered_json provenance = {{"format", to_string(source.format)},
                             {"checkpoint", source.weights_path.filename().string()},
                             {"notes", source.notes}};
  ordered_json document = {
      {"format_version", source.quantization.is_null() ? kFormatVersion : kQuantizedFormatVersion},
      {"architecture", kU2ppArchitectureName},
      {"model", model},
      {"features", features},
      {"tokenizer", tokenizer},
      {"decode", decode},
      {"source", provenance}};
  if (!source.quantization.is_null()) document["quantization"] = source.quantization;
  return document;
}

WenetConfig parse_native_config(const json& document, const std::string& what) {
  return parse_native(document, what).config;
}

void save_native_checkpoint(const ModelSource& source, const fs::path& requested,
                            const NativeWriteOptions& options) {
  validate(source.config, "the model to write");
  OASR_CHECK(source.weights != nullptr, kInvalidArgument, "the model to write has no weights");
  OASR_CHECK(static_cast<int64_t>(source.units.size()) == source.config.model.vocab_size,
             kInvalidArgument, "the model to write has ", source.units.size(),
             " units but a vocabulary of ", source.config.model.vocab_size);

  io::StagedDirectoryOptions staged;
  staged.force = options.force;
  staged.source = source.dir;
  staged.what = "checkpoint";
  io::write_staged_directory(requested, staged, [&](const fs::path& staging) {
    write_contents(source, staging, options);
  });
}

ModelSource load_native_dir(const fs::path& dir) {
  const fs::path config_path = dir / kNativeConfigName;
  const std::string what = config_path.string();
  const json document = io::read_json_file(config_path);
  NativeConfig native = parse_native(document, what);
  ModelSource source;
  source.format = CheckpointFormat::kNative;
  source.dir = dir;
  source.format_version = native.format_version;
  source.quantization = native.quantization;
  source.config = native.config;
  auto checkpoint = io::SafeTensorsCheckpoint::open(dir);
  source.weights_path =
      checkpoint.index_path().empty() ? checkpoint.files().front() : checkpoint.index_path();
  auto weights = std::make_shared<CheckpointTensorSource>(std::move(checkpoint));
  source.units = read_units(dir / native.units_file, native.config.model.vocab_size);
  if (!native.bpe_model_file.empty()) {
    source.bpe_model = dir / native.bpe_model_file;
    OASR_CHECK(fs::is_regular_file(source.bpe_model), kNotFound, what,
               ": the tokenizer's bpe_model ", source.bpe_model.string(), " is missing");
  }
  const bool has_mean = weights->contains(kCmvnMeanName);
  const bool has_istd = weights->contains(kCmvnIstdName);
  if (native.cmvn) {
    OASR_CHECK(has_mean && has_istd, kCorruptFile, source.weights_path.string(),
               ": features.cmvn is \"tensors\" but ", kCmvnMeanName, " / ", kCmvnIstdName,
               " are missing");
    for (const char* name : {kCmvnMeanName, kCmvnIstdName}) {
      OASR_CHECK(weights->dtype(name) == DType::kF32 &&
                     weights->shape(name) == Shape{native.config.model.encoder.input_dim},
                 kCorruptFile, source.weights_path.string(), ": ", name, " is ",
                 dtype_name(weights->dtype(name)), shape_str(weights->shape(name)),
                 "; expected float32[", native.config.model.encoder.input_dim, "]");
    }
    source.cmvn = {weights->get(kCmvnMeanName), weights->get(kCmvnIstdName)};
  } else {
    OASR_CHECK(!has_mean && !has_istd, kCorruptFile, what,
               ": features.cmvn is \"none\" but the weights hold CMVN tensors");
  }
  source.weights = std::move(weights);
  return source;
}

ModelSource load_checkpoint_dir(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    if (looks_like_native_dir(path)) return load_native_dir(path);
    if (fs::is_regular_file(path / "train.yaml", error)) return load_wenet_dir(path);
    OASR_THROW(kNotFound, path.string(), ": not a checkpoint directory: expected ",
               kNativeConfigName, " (oasr native) or train.yaml with final.pt (WeNet)");
  }
  OASR_CHECK(fs::exists(path, error), kNotFound, path.string(), ": no such file or directory");
  OASR_CHECK(path.extension() == ".pt", kInvalidArgument, path.string(),
             ": expected a checkpoint directory or a WeNet .pt file");
  return load_wenet_dir(path);
}

}  // namespace oasr::models
