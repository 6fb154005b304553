// train.yaml -> WenetConfig. Key names and defaults follow WeNet's
// ConformerEncoder / TransformerDecoder / BiTransformerDecoder constructors
// and wenet/utils/train_utils.py (input_dim, output_dim, special tokens).
#include "models/u2pp/wenet_config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include "core/error.h"

namespace oasr::models {

namespace {

// Re-throws an error from a parser that does not know the file, naming it.
template <typename F>
auto in_file(const std::string& source, F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(e.code(), source + ": " + e.what());
  }
}

// One mapping of train.yaml, read key by key with typed conversions; keys it
// was not asked about can be refused at the end.
class Section {
 public:
  Section(YAML::Node node, std::string name, const std::string& source)
      // An absent key yields an invalid node, which throws on every use but
      // IsDefined (assignment included): an empty section stands in for it.
      : node_(node.IsDefined() ? node : YAML::Node(YAML::NodeType::Null)),
        name_(std::move(name)),
        source_(source) {
    OASR_CHECK(node_.IsNull() || node_.IsMap(), kCorruptFile, source_, ": ", name_,
               " is not a mapping");
  }

  // Present and not null.
  bool has(const std::string& key) {
    seen_.insert(key);
    if (!node_.IsMap()) return false;
    const YAML::Node value = std::as_const(node_)[key];
    return value.IsDefined() && !value.IsNull();
  }
  YAML::Node node(const std::string& key) {
    seen_.insert(key);
    return node_.IsMap() ? std::as_const(node_)[key] : YAML::Node(YAML::NodeType::Undefined);
  }
  std::string field(const std::string& key) const {
    return name_.empty() ? key : name_ + "." + key;
  }

  template <typename T>
  T get(const std::string& key, T fallback) {
    if (!has(key)) return fallback;
    const YAML::Node value = std::as_const(node_)[key];
    try {
      OASR_CHECK(value.IsScalar(), kCorruptFile, source_, ": ", field(key),
                 " must be a single value");
      return value.as<T>();
    } catch (const YAML::Exception&) {
      OASR_THROW(kCorruptFile, source_, ": ", field(key), ": expected ", kind_name<T>(),
                 ", found '", value.Scalar(), "'");
    }
  }
  std::string get_string(const std::string& key, const std::string& fallback = "") {
    return get<std::string>(key, fallback);
  }

  // A key that must keep WeNet's default because oasr implements only that.
  template <typename T>
  void require(const std::string& key, T expected, const std::string& why) {
    if (!has(key)) return;
    const T value = get<T>(key, expected);
    if (value != expected) {
      std::ostringstream shown;
      shown << std::boolalpha << value;
      OASR_THROW(kUnsupported, source_, ": ", field(key), " = ", shown.str(), " is not supported (",
                 why, ")");
    }
  }
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* key : keys) seen_.insert(key);
  }
  void reject_unknown() const {
    if (!node_.IsMap()) return;
    for (const auto& entry : node_) {
      const std::string key = entry.first.Scalar();
      OASR_CHECK(seen_.count(key) > 0, kUnsupported, source_, ": unknown key ", field(key),
                 " (it may change the network, and oasr does not implement it)");
    }
  }

 private:
  template <typename T>
  static const char* kind_name() {
    if constexpr (std::is_same_v<T, bool>) return "true or false";
    if constexpr (std::is_integral_v<T>) return "an integer";
    if constexpr (std::is_floating_point_v<T>) return "a number";
    return "a string";
  }

  YAML::Node node_;
  std::string name_;
  const std::string& source_;
  std::set<std::string> seen_;
};

constexpr const char* kOnlyDefault = "oasr implements WeNet's default only";

void parse_encoder(Section& conf, const std::string& source, U2ppEncoderConfig& encoder) {
  encoder.output_size = conf.get<int64_t>("output_size", encoder.output_size);
  encoder.attention_heads = conf.get<int64_t>("attention_heads", encoder.attention_heads);
  encoder.linear_units = conf.get<int64_t>("linear_units", encoder.linear_units);
  encoder.num_blocks = conf.get<int64_t>("num_blocks", encoder.num_blocks);
  const std::string input_layer = conf.get_string("input_layer", "conv2d");
  encoder.input_layer = in_file(source, [&] { return parse_u2pp_input_layer(input_layer); });
  for (const auto& [key, only] : {std::pair{"pos_enc_layer_type", "rel_pos"},
                                  std::pair{"selfattention_layer_type", "rel_selfattn"}}) {
    const std::string value = conf.get_string(key, only);
    OASR_CHECK(value == only, kUnsupported, source, ": ", conf.field(key), " '", value,
               "' is not supported (supported: ", only, ")");
  }
  encoder.normalize_before = conf.get<bool>("normalize_before", encoder.normalize_before);
  encoder.macaron_style = conf.get<bool>("macaron_style", encoder.macaron_style);
  encoder.use_cnn_module = conf.get<bool>("use_cnn_module", encoder.use_cnn_module);
  encoder.cnn_module_kernel = conf.get<int64_t>("cnn_module_kernel", encoder.cnn_module_kernel);
  encoder.causal = conf.get<bool>("causal", encoder.causal);
  const std::string norm = conf.get_string("cnn_module_norm", "batch_norm");
  encoder.cnn_module_norm = in_file(source, [&] { return parse_u2pp_conv_norm(norm); });
  encoder.activation = parse_wenet_activation(conf.get_string("activation_type", "swish"),
                                              source + ": " + conf.field("activation_type"));
  encoder.static_chunk_size = conf.get<int64_t>("static_chunk_size", encoder.static_chunk_size);
  encoder.use_dynamic_chunk = conf.get<bool>("use_dynamic_chunk", encoder.use_dynamic_chunk);
  encoder.query_bias = conf.get<bool>("query_bias", encoder.query_bias);
  encoder.key_bias = conf.get<bool>("key_bias", encoder.key_bias);
  encoder.value_bias = conf.get<bool>("value_bias", encoder.value_bias);
  encoder.conv_bias = conf.get<bool>("conv_bias", encoder.conv_bias);
  encoder.mlp_bias = conf.get<bool>("mlp_bias", encoder.mlp_bias);
  encoder.final_norm = conf.get<bool>("final_norm", encoder.final_norm);
  encoder.norm_eps = static_cast<float>(conf.get<double>("norm_eps", encoder.norm_eps));
  encoder.conv_norm_eps =
      static_cast<float>(conf.get<double>("conv_norm_eps", encoder.conv_norm_eps));

  conf.require<bool>("concat_after", false, kOnlyDefault);
  conf.require<std::string>("layer_norm_type", "layer_norm", kOnlyDefault);
  conf.require<std::string>("mlp_type", "position_wise_feed_forward", kOnlyDefault);
  conf.require<int64_t>("conv_inner_factor", 2, kOnlyDefault);
  conf.require<int64_t>("n_kv_head", encoder.attention_heads, "grouped-query attention");
  if (encoder.attention_heads > 0) {
    conf.require<int64_t>("head_dim", encoder.output_size / encoder.attention_heads,
                          "the head width must be output_size / attention_heads");
  }
  // Training-only, or without effect on a ConformerEncoder.
  conf.ignore({"dropout_rate", "positional_dropout_rate", "attention_dropout_rate",
               "gradient_checkpointing", "use_sdpa", "positionwise_conv_kernel_size",
               "use_dynamic_left_chunk", "n_expert", "n_expert_activated"});
  conf.reject_unknown();
}

void parse_decoder(const std::string& type_name, Section& conf, const std::string& source,
                   U2ppDecoderConfig& decoder) {
  decoder.type = in_file(source, [&] { return parse_u2pp_decoder_type(type_name); });
  decoder.attention_heads = conf.get<int64_t>("attention_heads", decoder.attention_heads);
  decoder.linear_units = conf.get<int64_t>("linear_units", decoder.linear_units);
  decoder.num_blocks = conf.get<int64_t>("num_blocks", decoder.num_blocks);
  if (decoder.type == U2ppDecoderType::kBiTransformer) {
    decoder.r_num_blocks = conf.get<int64_t>("r_num_blocks", decoder.r_num_blocks);
  } else {
    OASR_CHECK(!conf.has("r_num_blocks"), kCorruptFile, source, ": ", conf.field("r_num_blocks"),
               " is set but the decoder is 'transformer' "
               "(only 'bitransformer' has a right-to-left decoder)");
  }
  decoder.normalize_before = conf.get<bool>("normalize_before", decoder.normalize_before);
  decoder.activation = parse_wenet_activation(conf.get_string("activation_type", "relu"),
                                              source + ": " + conf.field("activation_type"));
  decoder.norm_eps = static_cast<float>(conf.get<double>("norm_eps", decoder.norm_eps));
  conf.require<std::string>("input_layer", "embed", kOnlyDefault);
  for (const char* key :
       {"use_output_layer", "src_attention", "query_bias", "key_bias", "value_bias",
        "src_query_bias", "src_key_bias", "src_value_bias", "mlp_bias"}) {
    conf.require<bool>(key, true, kOnlyDefault);
  }
  conf.require<bool>("concat_after", false, kOnlyDefault);
  conf.require<std::string>("layer_norm_type", "layer_norm", kOnlyDefault);
  conf.require<std::string>("mlp_type", "position_wise_feed_forward", kOnlyDefault);
  conf.require<int64_t>("n_kv_head", decoder.attention_heads, "grouped-query attention");
  // tie_word_embedding: the state dict holds both tied tensors, so loading
  // by name needs nothing more.
  conf.ignore({"dropout_rate", "positional_dropout_rate", "self_attention_dropout_rate",
               "src_attention_dropout_rate", "gradient_checkpointing", "use_sdpa",
               "tie_word_embedding", "n_expert", "n_expert_activated", "head_dim"});
  conf.reject_unknown();
}

}  // namespace

const char* tokenizer_type_name(TokenizerType type) {
  return type == TokenizerType::kBpe ? "bpe" : "char";
}

TokenizerType parse_tokenizer_type(const std::string& name, const std::string& what) {
  if (name == "char") return TokenizerType::kChar;
  if (name == "bpe") return TokenizerType::kBpe;
  OASR_THROW(kUnsupported, what, " '", name, "' is not supported (supported: char, bpe)");
}

Activation parse_wenet_activation(const std::string& name, const std::string& what) {
  if (name == "swish") return Activation::kSwish;
  if (name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGeluErf;
  OASR_THROW(kUnsupported, what, " '", name, "' is not supported (supported: swish, relu, gelu)");
}

const char* wenet_activation_name(Activation activation) {
  switch (activation) {
    case Activation::kSwish:
      return "swish";
    case Activation::kRelu:
      return "relu";
    case Activation::kGeluErf:
      return "gelu";
    default:
      break;
  }
  OASR_THROW(kInternal, "activation ", activation_name(activation), " has no WeNet spelling");
}

void validate(const WenetConfig& config, const std::string& what) {
  in_file(what, [&] {
    config.model.validate();
    return 0;
  });
  const FbankConfig& fbank = config.fbank;
  OASR_CHECK(fbank.sample_rate > 0 && fbank.num_mel_bins > 0 && fbank.frame_length_ms > 0 &&
                 fbank.frame_shift_ms > 0,
             kInvalidArgument, what,
             ": fbank sample_rate, num_mel_bins, frame_length and "
             "frame_shift must be positive");
  OASR_CHECK(config.model.encoder.input_dim == fbank.num_mel_bins, kInvalidArgument, what,
             ": input_dim ", config.model.encoder.input_dim,
             " differs from the fbank's num_mel_bins ", fbank.num_mel_bins);
}

namespace {
WenetTrainYaml parse_root(const YAML::Node& root, const std::string& source);
}  // namespace

WenetTrainYaml parse_wenet_train_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    OASR_THROW(kCorruptFile, source, ": malformed YAML at line ", e.mark.line + 1, ", column ",
               e.mark.column + 1, ": ", e.msg);
  }
  OASR_CHECK(root.IsMap(), kCorruptFile, source, ": not a YAML mapping of configuration keys");
  try {
    return parse_root(root, source);
  } catch (const YAML::Exception& e) {  // a node of an unexpected shape
    OASR_THROW(kCorruptFile, source, ": unexpected structure: ", e.msg);
  }
}

namespace {

WenetTrainYaml parse_root(const YAML::Node& root, const std::string& source) {
  Section top(root, "", source);
  WenetTrainYaml out;
  WenetConfig& config = out.config;
  U2ppConfig& model = config.model;

  const std::string model_type = top.get_string("model", "asr_model");
  OASR_CHECK(model_type == "asr_model", kUnsupported, source, ": model '", model_type,
             "' is not supported (oasr serves WeNet's asr_model: CTC + attention decoder)");
  const std::string encoder = top.get_string("encoder", "conformer");
  OASR_CHECK(encoder == "conformer", kUnsupported, source, ": encoder '", encoder,
             "' is not supported (oasr serves the U2++ conformer: encoder: conformer)");
  const std::string ctc = top.get_string("ctc", "ctc");
  OASR_CHECK(ctc == "ctc", kUnsupported, source, ": ctc '", ctc, "' is not supported");
  OASR_CHECK(top.has("encoder_conf"), kCorruptFile, source, ": encoder_conf is missing");
  OASR_CHECK(top.has("decoder_conf"), kCorruptFile, source, ": decoder_conf is missing");
  OASR_CHECK(top.has("decoder") || !top.node("decoder").IsDefined(), kUnsupported, source,
             ": decoder is null; oasr needs an attention decoder (bitransformer or transformer)");
  Section encoder_conf(top.node("encoder_conf"), "encoder_conf", source);
  parse_encoder(encoder_conf, source, model.encoder);
  Section decoder_conf(top.node("decoder_conf"), "decoder_conf", source);
  parse_decoder(top.get_string("decoder", "bitransformer"), decoder_conf, source, model.decoder);

  Section model_conf(top.node("model_conf"), "model_conf", source);
  config.ctc_weight = model_conf.get<double>("ctc_weight", config.ctc_weight);
  config.reverse_weight = model_conf.get<double>("reverse_weight", config.reverse_weight);
  Section ctc_conf(top.node("ctc_conf"), "ctc_conf", source);
  model.blank_id = ctc_conf.get<int64_t>("ctc_blank_id", 0);

  // Features: WeNet's fbank only.
  Section dataset(top.node("dataset_conf"), "dataset_conf", source);
  for (const char* other : {"mfcc_conf", "log_mel_spectrogram_conf"}) {
    OASR_CHECK(dataset.has("fbank_conf") || !dataset.has(other), kUnsupported, source,
               ": dataset_conf.", other, " features are not supported (fbank_conf only)");
  }
  OASR_CHECK(dataset.has("fbank_conf"), kCorruptFile, source,
             ": dataset_conf.fbank_conf is missing (the features the model was trained on)");
  Section fbank(dataset.node("fbank_conf"), "dataset_conf.fbank_conf", source);
  config.fbank.num_mel_bins = fbank.get<int64_t>("num_mel_bins", config.fbank.num_mel_bins);
  config.fbank.frame_length_ms = fbank.get<double>("frame_length", config.fbank.frame_length_ms);
  config.fbank.frame_shift_ms = fbank.get<double>("frame_shift", config.fbank.frame_shift_ms);
  config.fbank.dither = fbank.get<double>("dither", config.fbank.dither);
  Section resample(dataset.node("resample_conf"), "dataset_conf.resample_conf", source);
  config.fbank.sample_rate = resample.get<int64_t>("resample_rate", config.fbank.sample_rate);

  model.encoder.input_dim = top.get<int64_t>("input_dim", config.fbank.num_mel_bins);
  const bool has_output_dim = top.has("output_dim");
  const bool has_vocab_size = top.has("vocab_size");
  OASR_CHECK(has_output_dim || has_vocab_size, kCorruptFile, source,
             ": neither output_dim nor vocab_size is set (the vocabulary size)");
  model.vocab_size = top.get<int64_t>(has_output_dim ? "output_dim" : "vocab_size", 0);
  if (has_output_dim && has_vocab_size) {
    const int64_t vocab = top.get<int64_t>("vocab_size", 0);
    OASR_CHECK(vocab == model.vocab_size, kCorruptFile, source, ": output_dim ", model.vocab_size,
               " differs from vocab_size ", vocab);
  }

  // CMVN: WeNet 3.x writes cmvn + cmvn_conf, 2.x a top-level cmvn_file.
  WenetRecordedPaths& paths = out.paths;
  if (top.has("cmvn")) {
    const std::string cmvn = top.get_string("cmvn");
    OASR_CHECK(cmvn == "global_cmvn", kUnsupported, source, ": cmvn '", cmvn,
               "' is not supported (global_cmvn only)");
    Section cmvn_conf(top.node("cmvn_conf"), "cmvn_conf", source);
    paths.cmvn_file = cmvn_conf.get_string("cmvn_file");
    paths.is_json_cmvn = cmvn_conf.get<bool>("is_json_cmvn", true);
    OASR_CHECK(!paths.cmvn_file.empty(), kCorruptFile, source,
               ": cmvn is global_cmvn but cmvn_conf.cmvn_file is not set");
  } else if (!top.node("cmvn").IsDefined()) {
    paths.cmvn_file = top.get_string("cmvn_file");
    paths.is_json_cmvn = top.get<bool>("is_json_cmvn", true);
  }
  model.encoder.global_cmvn = !paths.cmvn_file.empty();

  // Tokenizer and special tokens.
  Section tokenizer_conf(top.node("tokenizer_conf"), "tokenizer_conf", source);
  if (top.has("tokenizer")) {
    out.tokenizer = parse_tokenizer_type(top.get_string("tokenizer"), source + ": tokenizer");
    config.tokenizer.type = *out.tokenizer;
  }
  paths.symbol_table = tokenizer_conf.get_string("symbol_table_path");
  paths.bpe_model = tokenizer_conf.get_string("bpe_path");
  config.tokenizer.split_with_space = tokenizer_conf.get<bool>("split_with_space", false);
  config.tokenizer.connect_symbol = tokenizer_conf.get_string("connect_symbol", "");
  Section special(tokenizer_conf.node("special_tokens"), "tokenizer_conf.special_tokens", source);
  model.sos = special.get<int64_t>("<sos>", -1);
  model.eos = special.get<int64_t>("<eos>", -1);

  validate(config, source);
  return out;
}

}  // namespace

WenetTrainYaml load_wenet_train_yaml(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kNotFound, path.string(), ": cannot open train.yaml");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_wenet_train_yaml(text.str(), path.string());
}

}  // namespace oasr::models
