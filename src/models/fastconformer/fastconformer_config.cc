#include "models/fastconformer/fastconformer_config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>

#include "core/error.h"

namespace oasr::models {
namespace {

// One yaml section with its path, for messages ("encoder.d_model").
struct Section {
  YAML::Node node;
  std::string path;
  const std::filesystem::path* file;

  std::string where(const std::string& key) const {
    return file->string() + ": " + (path.empty() ? key : path + "." + key);
  }
  bool has(const std::string& key) const { return node[key] && !node[key].IsNull(); }
  Section child(const std::string& key) const {
    OASR_CHECK(has(key) && node[key].IsMap(), kCorruptFile, where(key),
               " is missing or not a mapping");
    return {node[key], path.empty() ? key : path + "." + key, file};
  }
  template <typename T>
  T get(const std::string& key) const {
    OASR_CHECK(has(key), kCorruptFile, where(key), " is missing");
    try {
      return node[key].as<T>();
    } catch (const YAML::Exception& e) {
      OASR_THROW(kCorruptFile, where(key), ": cannot read the value: ", e.what());
    }
  }
  template <typename T>
  T get(const std::string& key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  int64_t positive(const std::string& key) const {
    const int64_t value = get<int64_t>(key);
    OASR_CHECK(value > 0, kCorruptFile, where(key), " must be positive, got ", value);
    return value;
  }
};

audio::NemoMelOptions parse_preprocessor(const Section& s) {
  const std::filesystem::path* file = s.file;
  const std::string target = s.get<std::string>("_target_", "");
  OASR_CHECK(
      target.empty() || target.find("AudioToMelSpectrogramPreprocessor") != std::string::npos,
      kUnsupported, s.where("_target_"), ": ", target,
      " is not served (only AudioToMelSpectrogramPreprocessor)");
  audio::NemoMelOptions o;
  o.sample_rate = s.get<int64_t>("sample_rate", 16000);
  // NeMo converts seconds to samples with int(), truncating.
  o.win_length =
      static_cast<int64_t>(s.get<double>("window_size", 0.02) * static_cast<double>(o.sample_rate));
  o.hop_length = static_cast<int64_t>(s.get<double>("window_stride", 0.01) *
                                      static_cast<double>(o.sample_rate));
  o.n_fft = s.get<int64_t>("n_fft", 0);
  o.features = s.get<int64_t>("features", 64);
  const std::string window = s.get<std::string>("window", "hann");
  OASR_CHECK(window == "hann", kUnsupported, s.where("window"), ": '", window,
             "' is not served (only hann)");
  const auto parsed = [&s](const char* key, const char* fallback, auto parse) {
    try {
      return parse(s.get<std::string>(key, fallback));
    } catch (const Error& e) {
      OASR_THROW(kCorruptFile, s.where(key), ": ", e.what());
    }
  };
  o.normalize = parsed("normalize", "per_feature", audio::parse_nemo_normalize);
  o.log_zero_guard_type = parsed("log_zero_guard_type", "add", audio::parse_nemo_log_zero_guard);
  o.log = s.get<bool>("log", true);
  o.pad_to = s.get<int64_t>("pad_to", 16);
  o.pad_value = s.get<float>("pad_value", 0.0f);
  o.mag_power = s.get<double>("mag_power", 2.0);
  if (s.node["preemph"] && s.node["preemph"].IsNull()) {
    o.preemph.reset();
  } else if (s.has("preemph")) {
    o.preemph = s.get<double>("preemph");
  }
  o.exact_pad = s.get<bool>("exact_pad", false);
  o.frame_splicing = s.get<int64_t>("frame_splicing", 1);
  if (s.has("log_zero_guard_value")) {
    const std::string guard = s.get<std::string>("log_zero_guard_value");
    if (guard == "tiny") {
      o.log_zero_guard_value = std::numeric_limits<float>::min();
    } else if (guard == "eps") {
      o.log_zero_guard_value = std::numeric_limits<float>::epsilon();
    } else {
      o.log_zero_guard_value = s.get<double>("log_zero_guard_value");
    }
  }
  try {
    o.validate();
  } catch (const Error& e) {
    throw Error(e.code(), file->string() + ": preprocessor: " + e.what());
  }
  return o;
}

FastConformerEncoderConfig parse_encoder(const Section& s) {
  const std::string target = s.get<std::string>("_target_", "");
  OASR_CHECK(target.find("ConformerEncoder") != std::string::npos, kUnsupported,
             s.where("_target_"), ": ", target, " is not served (only ConformerEncoder)");
  FastConformerEncoderConfig e;
  e.feat_in = s.positive("feat_in");
  e.n_layers = s.positive("n_layers");
  e.d_model = s.positive("d_model");
  e.n_heads = s.positive("n_heads");
  OASR_CHECK(e.d_model % e.n_heads == 0, kCorruptFile, s.where("n_heads"), ": d_model ", e.d_model,
             " is not divisible by n_heads ", e.n_heads);
  e.ff_expansion_factor = s.get<int64_t>("ff_expansion_factor", 4);
  OASR_CHECK(e.ff_expansion_factor > 0, kCorruptFile, s.where("ff_expansion_factor"),
             " must be positive");
  e.conv_kernel_size = s.get<int64_t>("conv_kernel_size", 31);
  OASR_CHECK(e.conv_kernel_size > 0 && e.conv_kernel_size % 2 == 1, kCorruptFile,
             s.where("conv_kernel_size"), " must be odd and positive, got ", e.conv_kernel_size);
  e.conv_norm_type = s.get<std::string>("conv_norm_type", "batch_norm");
  OASR_CHECK(e.conv_norm_type == "batch_norm", kUnsupported, s.where("conv_norm_type"), ": '",
             e.conv_norm_type, "' is not served (only batch_norm)");
  OASR_CHECK(!s.has("conv_context_size"), kUnsupported, s.where("conv_context_size"),
             ": causal convolutions (cache-aware streaming models) are not served yet");
  e.subsampling = s.get<std::string>("subsampling", "striding");
  OASR_CHECK(e.subsampling == "dw_striding", kUnsupported, s.where("subsampling"), ": '",
             e.subsampling, "' is not served (only dw_striding, FastConformer's)");
  e.subsampling_factor = s.get<int64_t>("subsampling_factor", 4);
  OASR_CHECK(e.subsampling_factor >= 2 && (e.subsampling_factor & (e.subsampling_factor - 1)) == 0,
             kCorruptFile, s.where("subsampling_factor"), " must be a power of 2 >= 2, got ",
             e.subsampling_factor);
  e.subsampling_conv_channels = s.get<int64_t>("subsampling_conv_channels", -1);
  if (e.subsampling_conv_channels == -1) e.subsampling_conv_channels = e.d_model;
  OASR_CHECK(e.subsampling_conv_channels > 0, kCorruptFile, s.where("subsampling_conv_channels"),
             " must be positive or -1");
  OASR_CHECK(!s.get<bool>("causal_downsampling", false), kUnsupported,
             s.where("causal_downsampling"),
             ": causal subsampling (cache-aware streaming models) is not served yet");
  const std::string attention = s.get<std::string>("self_attention_model", "rel_pos");
  OASR_CHECK(attention == "rel_pos", kUnsupported, s.where("self_attention_model"), ": '",
             attention, "' is not served (only rel_pos)");
  if (s.has("att_context_size")) {
    const auto context = s.get<std::vector<int64_t>>("att_context_size");
    bool full = true;
    for (int64_t c : context) full = full && c == -1;
    OASR_CHECK(full, kUnsupported, s.where("att_context_size"),
               ": limited-context attention (cache-aware streaming models) is not served yet; "
               "only [-1, -1]");
  }
  OASR_CHECK(s.get<bool>("untie_biases", true), kUnsupported, s.where("untie_biases"),
             ": position biases shared by all layers are not served (only untie_biases: true)");
  const int64_t feat_out = s.get<int64_t>("feat_out", -1);
  OASR_CHECK(feat_out == -1, kUnsupported, s.where("feat_out"), ": an output projection (",
             feat_out, ") is not served");
  const std::string reduction = s.get<std::string>("reduction", "");
  OASR_CHECK(reduction.empty(), kUnsupported, s.where("reduction"),
             ": time reduction inside the encoder is not served");
  e.xscaling = s.get<bool>("xscaling", true);
  e.pos_emb_max_len = s.get<int64_t>("pos_emb_max_len", 5000);
  OASR_CHECK(e.pos_emb_max_len > 0, kCorruptFile, s.where("pos_emb_max_len"), " must be positive");
  e.use_bias = s.get<bool>("use_bias", true);
  return e;
}

// A ConvASRDecoder section (a CTC head): its vocabulary, after checking its
// class and sizes.
std::vector<std::string> parse_conv_asr_decoder(const Section& decoder,
                                                const FastConformerConfig& config) {
  const std::string decoder_target = decoder.get<std::string>("_target_", "");
  OASR_CHECK(decoder_target.find("ConvASRDecoder") != std::string::npos, kUnsupported,
             decoder.where("_target_"), ": ", decoder_target,
             " is not served (a CTC head is ConvASRDecoder; a transducer's config also has a "
             "joint)");
  const int64_t feat_in = decoder.get<int64_t>("feat_in", config.encoder.d_model);
  OASR_CHECK(feat_in == config.encoder.d_model, kCorruptFile, decoder.where("feat_in"), ": ",
             feat_in, " does not match encoder.d_model ", config.encoder.d_model);
  auto vocabulary = decoder.get<std::vector<std::string>>("vocabulary");
  const int64_t classes = decoder.get<int64_t>("num_classes");
  OASR_CHECK(classes == static_cast<int64_t>(vocabulary.size()) && classes > 0, kCorruptFile,
             decoder.where("num_classes"), ": ", classes, " does not match the ", vocabulary.size(),
             " entries of ", decoder.where("vocabulary"));
  return vocabulary;
}

void parse_ctc_head(const Section& top, FastConformerConfig& config) {
  config.head = FastConformerHead::kCtc;
  config.vocabulary = parse_conv_asr_decoder(top.child("decoder"), config);
}

// A hybrid model's second head (EncDecHybridRNNTCTCBPEModel's aux_ctc): a
// CTC decoder over the same vocabulary as the transducer.
void parse_aux_ctc(const Section& top, FastConformerConfig& config) {
  const Section decoder = top.child("aux_ctc").child("decoder");
  OASR_CHECK(parse_conv_asr_decoder(decoder, config) == config.vocabulary, kCorruptFile,
             decoder.where("vocabulary"), " differs from ", config.vocabulary_key,
             "; a hybrid model's two heads share one vocabulary");
  config.has_aux_ctc = true;
}

// RNNTDecoder + RNNTJoint (EncDecRNNTBPEModel), TDT when the loss is "tdt".
void parse_transducer(const Section& top, FastConformerConfig& config) {
  FastConformerTransducerConfig t;
  const Section decoder = top.child("decoder");
  const std::string decoder_target = decoder.get<std::string>("_target_", "");
  OASR_CHECK(decoder_target.find("RNNTDecoder") != std::string::npos, kUnsupported,
             decoder.where("_target_"), ": ", decoder_target,
             " is not served (a transducer's predictor must be RNNTDecoder, an LSTM)");
  OASR_CHECK(!decoder.has("normalization_mode"), kUnsupported, decoder.where("normalization_mode"),
             ": a normalized predictor LSTM is not served (only null)");
  OASR_CHECK(decoder.get<bool>("blank_as_pad", true), kUnsupported, decoder.where("blank_as_pad"),
             ": only blank_as_pad: true is served (blank is the predictor's start symbol)");
  const Section prednet = decoder.child("prednet");
  t.pred_hidden = prednet.positive("pred_hidden");
  t.pred_rnn_layers = prednet.positive("pred_rnn_layers");
  const int64_t rnn_hidden = prednet.get<int64_t>("rnn_hidden_size", -1);
  OASR_CHECK(rnn_hidden <= 0 || rnn_hidden == t.pred_hidden, kUnsupported,
             prednet.where("rnn_hidden_size"), ": ", rnn_hidden, " differs from pred_hidden ",
             t.pred_hidden, " (an LSTM with a projection), which is not served");

  const Section joint = top.child("joint");
  const std::string joint_target = joint.get<std::string>("_target_", "");
  OASR_CHECK(joint_target.find("RNNTJoint") != std::string::npos, kUnsupported,
             joint.where("_target_"), ": ", joint_target, " is not served (only RNNTJoint)");
  const Section jointnet = joint.child("jointnet");
  t.joint_hidden = jointnet.positive("joint_hidden");
  const std::string activation = jointnet.get<std::string>("activation");
  OASR_CHECK(activation == "relu" || activation == "tanh" || activation == "sigmoid", kUnsupported,
             jointnet.where("activation"), ": '", activation,
             "' is not a joint activation NeMo has (relu, tanh, sigmoid)");
  t.activation = parse_activation(activation);
  // NeMo puts a Dropout between the activation and the output linear only
  // when the rate is non-zero, which moves the linear's index in joint_net.
  t.joint_has_dropout = jointnet.get<double>("dropout", 0.0) != 0.0;
  const int64_t encoder_hidden = jointnet.get<int64_t>("encoder_hidden", config.encoder.d_model);
  OASR_CHECK(encoder_hidden == config.encoder.d_model, kCorruptFile,
             jointnet.where("encoder_hidden"), ": ", encoder_hidden,
             " does not match encoder.d_model ", config.encoder.d_model);
  const int64_t joint_pred_hidden = jointnet.get<int64_t>("pred_hidden", t.pred_hidden);
  OASR_CHECK(joint_pred_hidden == t.pred_hidden, kCorruptFile, jointnet.where("pred_hidden"), ": ",
             joint_pred_hidden, " does not match decoder.prednet.pred_hidden ", t.pred_hidden);

  config.vocabulary = joint.get<std::vector<std::string>>("vocabulary");
  config.vocabulary_key = "joint.vocabulary";
  const int64_t classes = joint.get<int64_t>("num_classes");
  OASR_CHECK(classes == static_cast<int64_t>(config.vocabulary.size()) && classes > 0, kCorruptFile,
             joint.where("num_classes"), ": ", classes, " does not match the ",
             config.vocabulary.size(), " entries of joint.vocabulary");
  const int64_t decoder_vocab = decoder.get<int64_t>("vocab_size", classes);
  OASR_CHECK(decoder_vocab == classes, kCorruptFile, decoder.where("vocab_size"), ": ",
             decoder_vocab, " does not match joint.num_classes ", classes);

  const std::string loss = top.has("loss")
                               ? top.child("loss").get<std::string>("loss_name", "default")
                               : std::string("default");
  const int64_t extra = joint.get<int64_t>("num_extra_outputs", 0);
  if (loss == "tdt") {
    const Section kwargs = top.child("loss").child("tdt_kwargs");
    t.durations = kwargs.get<std::vector<int64_t>>("durations");
    OASR_CHECK(!t.durations.empty(), kCorruptFile, kwargs.where("durations"), " is empty");
    for (int64_t d : t.durations) {
      OASR_CHECK(d >= 0, kCorruptFile, kwargs.where("durations"), ": duration ", d, " is negative");
    }
    OASR_CHECK(extra == static_cast<int64_t>(t.durations.size()), kCorruptFile,
               joint.where("num_extra_outputs"), ": ", extra, " does not match the ",
               t.durations.size(), " TDT durations of loss.tdt_kwargs.durations");
    config.head = FastConformerHead::kTdt;
  } else {
    OASR_CHECK(extra == 0, kUnsupported, joint.where("num_extra_outputs"), ": ", extra,
               " extra joint outputs with loss '", loss,
               "' (multi-blank transducers) are not served; RNN-T (0) and TDT (loss tdt) are");
    config.head = FastConformerHead::kRnnt;
  }
  if (top.has("decoding") && top.child("decoding").has("greedy")) {
    const Section greedy = top.child("decoding").child("greedy");
    const char* key = greedy.has("max_symbols") ? "max_symbols" : "max_symbols_per_step";
    if (greedy.has(key)) {
      t.max_symbols = greedy.get<int64_t>(key);
      OASR_CHECK(t.max_symbols > 0, kCorruptFile, greedy.where(key), " must be positive, got ",
                 t.max_symbols);
    }
  }
  config.transducer = t;
}

}  // namespace

FastConformerConfig parse_fastconformer_config(const std::string& text,
                                               const std::filesystem::path& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    OASR_THROW(kCorruptFile, file.string(), ": not valid YAML: ", e.what());
  }
  OASR_CHECK(root.IsMap(), kCorruptFile, file.string(), ": the model config is not a mapping");
  const Section top{root, "", &file};
  FastConformerConfig config;
  config.target = top.get<std::string>("target", "");
  config.preprocessor = parse_preprocessor(top.child("preprocessor"));
  config.encoder = parse_encoder(top.child("encoder"));
  OASR_CHECK(config.preprocessor.features == config.encoder.feat_in, kCorruptFile,
             top.where("encoder.feat_in"), ": ", config.encoder.feat_in,
             " does not match preprocessor.features ", config.preprocessor.features);

  if (top.has("joint")) {
    parse_transducer(top, config);
    if (top.has("aux_ctc")) parse_aux_ctc(top, config);
  } else {
    OASR_CHECK(!top.has("aux_ctc"), kCorruptFile, top.where("aux_ctc"),
               ": an auxiliary CTC head without a transducer (no joint) is not a NeMo model");
    parse_ctc_head(top, config);
  }
  const Section tokenizer = top.child("tokenizer");
  const std::string type = tokenizer.get<std::string>("type");
  OASR_CHECK(type == "bpe", kUnsupported, tokenizer.where("type"), ": '", type,
             "' is not served (only bpe, a SentencePiece model)");
  std::string model_path = tokenizer.get<std::string>("model_path");
  if (model_path.rfind("nemo:", 0) == 0) model_path.erase(0, 5);
  config.tokenizer_model = std::filesystem::path(model_path).filename().string();
  OASR_CHECK(!config.tokenizer_model.empty(), kCorruptFile, tokenizer.where("model_path"),
             " names no file");
  return config;
}

}  // namespace oasr::models
