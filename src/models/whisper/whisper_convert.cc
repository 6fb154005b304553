// CTranslate2 Whisper directories read as HF-named tensors (the writer of
// the HF layout is whisper_write.cc).
#include "models/whisper/whisper_convert.h"

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/ct2_model.h"
#include "io/json_file.h"
#include "models/whisper/whisper_dir.h"

namespace oasr::models {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Whisper spec revisions this reader knows: 1 and 2 stored the GELU as
// activation id 1 (CTranslate2 then had one GELU), revision 3 as id 3 (after
// GELU variants were added, id 1 became the tanh approximation).
constexpr uint32_t kNewestWhisperRevision = 3;
constexpr int64_t kGeluIdBeforeRevision3 = 1;
constexpr int64_t kGeluId = 3;
constexpr int64_t kFirstMultilingualVocab = 51865;
constexpr size_t kMaxDefectsShown = 12;

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// The spec name in a model.bin header, or "" when the file is not one.
std::string peek_spec_name(const fs::path& model_bin) {
  std::ifstream in(model_bin, std::ios::binary);
  uint32_t version = 0;
  uint16_t length = 0;
  if (!in.read(reinterpret_cast<char*>(&version), 4) || version < 2 ||
      version > io::kCt2NewestBinaryVersion || !in.read(reinterpret_cast<char*>(&length), 2) ||
      length == 0) {
    return "";
  }
  std::string name(length, '\0');
  if (!in.read(name.data(), length)) return "";
  name.pop_back();  // the NUL the length counts
  return name;
}

// Reads model.bin's variables under HF's names, checking each shape and
// remembering which variables were used, so none is left unexplained.
class Ct2WhisperReader {
 public:
  explicit Ct2WhisperReader(const io::Ct2Model& model)
      : model_(model), label_(model.path().string()) {}

  bool has(const std::string& name) const { return model_.contains(name); }

  int64_t scalar(const std::string& name) {
    if (!require(name)) return 0;
    used_.insert(model_.resolve(name));
    return model_.scalar_int(name);
  }
  // A scalar flag whose value is fixed for Whisper; absent is fine.
  void expect_flag(const std::string& name, int64_t expected, const char* meaning) {
    if (!has(name)) return;
    const int64_t value = scalar(name);
    if (value != expected) {
      defects_.push_back(name + " is " + std::to_string(value) + " (expected " +
                         std::to_string(expected) + ": " + meaning + ")");
    }
  }
  void ignore(const std::string& name) {
    if (has(name)) used_.insert(model_.resolve(name));
  }
  const Shape* shape_of(const std::string& name) {
    if (!require(name)) return nullptr;
    return &model_.info(name).shape;
  }

  // A floating tensor of the expected shape (dequantized when stored as
  // CTranslate2 int8 / int16 with a scale); undefined after a defect.
  Tensor take(const std::string& name, const Shape& expected) {
    if (!require(name)) return {};
    const io::Ct2VariableInfo& info = model_.info(name);
    used_.insert(info.name);
    if (info.shape != expected) {
      defects_.push_back(name + " is " + shape_str(info.shape) + ", expected " +
                         shape_str(expected));
      return {};
    }
    switch (info.dtype) {
      case io::Ct2DType::kFloat32:
      case io::Ct2DType::kFloat16:
      case io::Ct2DType::kBFloat16:
        return model_.get(name);
      case io::Ct2DType::kInt8:
      case io::Ct2DType::kInt16:
        return dequantize(name, info);
      case io::Ct2DType::kInt32:
        break;
    }
    defects_.push_back(name + " is " + io::ct2_dtype_name(info.dtype) +
                       ", not a floating or quantized weight");
    return {};
  }

  // Every variable used, every shape right; else one error listing all.
  void finish(const std::set<std::string>& ignorable) {
    std::vector<std::string> unexplained;
    for (const io::Ct2VariableInfo& info : model_.variables()) {
      if (!used_.count(info.name) && !ignorable.count(info.name)) {
        unexplained.push_back(info.name);
      }
    }
    if (!unexplained.empty()) {
      std::string list;
      for (size_t i = 0; i < unexplained.size() && i < kMaxDefectsShown; ++i) {
        list += (i ? ", " : "") + unexplained[i];
      }
      defects_.push_back(std::to_string(unexplained.size()) +
                         " variables this converter does not know (a Whisper variant it does not "
                         "support): " +
                         list);
    }
    throw_if_defects();
  }

  void throw_if_defects() const {
    if (defects_.empty()) return;
    std::string message;
    for (size_t i = 0; i < defects_.size() && i < kMaxDefectsShown; ++i) {
      message += "\n  " + defects_[i];
    }
    if (defects_.size() > kMaxDefectsShown) {
      message += "\n  ... and " + std::to_string(defects_.size() - kMaxDefectsShown) + " more";
    }
    OASR_THROW(kCorruptFile, label_, ": not a Whisper model this converter can read (",
               defects_.size(), " defects):", message);
  }

  void defect(std::string text) { defects_.push_back(std::move(text)); }
  bool ok() const { return defects_.empty(); }

 private:
  bool require(const std::string& name) {
    if (has(name)) return true;
    defects_.push_back(name + " is missing");
    return false;
  }

  // CTranslate2: int8 scale = 127 / amax per output row (float32 [rows]),
  // int16 scale = 2^10 / amax (a float32 scalar); q = round(w * scale).
  Tensor dequantize(const std::string& name, const io::Ct2VariableInfo& info) {
    const std::string scale_name = name + "_scale";
    if (!has(scale_name)) {
      defect(name + " is " + io::ct2_dtype_name(info.dtype) + " but has no " + scale_name);
      return {};
    }
    const io::Ct2VariableInfo& scale_info = model_.info(scale_name);
    used_.insert(scale_info.name);
    const bool per_row = info.dtype == io::Ct2DType::kInt8;
    const Shape scale_shape = per_row ? Shape{info.shape.at(0)} : Shape{};
    if (scale_info.dtype != io::Ct2DType::kFloat32 ||
        shape_numel(scale_info.shape) != shape_numel(scale_shape)) {
      defect(scale_name + " is " + io::ct2_dtype_name(scale_info.dtype) +
             shape_str(scale_info.shape) + ", expected float32" + shape_str(scale_shape));
      return {};
    }
    const Tensor scale = model_.get(scale_name).contiguous();
    const Tensor values = model_.get(name).to(DType::kF32).contiguous();
    Tensor out = Tensor::empty(info.shape, DType::kF32);
    const int64_t rows = per_row ? info.shape.at(0) : 1;
    const int64_t row_size = values.numel() / std::max<int64_t>(rows, 1);
    const float* q = values.data<float>();
    const float* s = scale.data<float>();
    float* w = out.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < row_size; ++j) w[r * row_size + j] = q[r * row_size + j] / s[r];
    }
    ++dequantized_;
    return out;
  }

 public:
  int dequantized_ = 0;

 private:
  const io::Ct2Model& model_;
  std::string label_;
  std::set<std::string> used_;
  std::vector<std::string> defects_;
};

int64_t count_layers(const io::Ct2Model& model, const std::string& stack) {
  int64_t layers = 0;
  while (model.contains(stack + "/layer_" + std::to_string(layers) +
                        "/self_attention/linear_0/weight")) {
    ++layers;
  }
  return layers;
}

bool any_nonzero(const Tensor& tensor) {
  if (!tensor.defined()) return false;
  const Tensor values = tensor.to(DType::kF32).contiguous();
  const float* data = values.data<float>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (data[i] != 0.0f) return true;
  }
  return false;
}

struct HfTensors {
  std::vector<std::pair<std::string, Tensor>> list;
  void add(const std::string& name, Tensor tensor) {
    if (tensor.defined()) list.emplace_back(name, std::move(tensor));
  }
};

// Rows [index * d, (index + 1) * d) of a fused projection.
Tensor part(const Tensor& fused, int64_t index, int64_t d) {
  return fused.defined() ? fused.slice(0, index * d, (index + 1) * d) : Tensor();
}

void add_layer_norm(Ct2WhisperReader& in, HfTensors& out, const std::string& from,
                    const std::string& to, int64_t d) {
  out.add(to + ".weight", in.take(from + "/gamma", {d}));
  out.add(to + ".bias", in.take(from + "/beta", {d}));
}

void add_linear(Ct2WhisperReader& in, HfTensors& out, const std::string& from,
                const std::string& to, int64_t rows, int64_t cols) {
  out.add(to + ".weight", in.take(from + "/weight", {rows, cols}));
  out.add(to + ".bias", in.take(from + "/bias", {rows}));
}

// q / k / v / out in HF's state-dict order (k_proj, v_proj, q_proj, out_proj).
void add_attention(Ct2WhisperReader& in, HfTensors& out, const std::string& from,
                   const std::string& to, int64_t d, bool cross, std::vector<std::string>& notes) {
  Tensor q_w, q_b, k_w, k_b, v_w, v_b;
  if (cross) {
    q_w = in.take(from + "/linear_0/weight", {d, d});
    q_b = in.take(from + "/linear_0/bias", {d});
    const Tensor kv_w = in.take(from + "/linear_1/weight", {2 * d, d});
    const Tensor kv_b = in.take(from + "/linear_1/bias", {2 * d});
    k_w = part(kv_w, 0, d), v_w = part(kv_w, 1, d);
    k_b = part(kv_b, 0, d), v_b = part(kv_b, 1, d);
  } else {
    const Tensor qkv_w = in.take(from + "/linear_0/weight", {3 * d, d});
    const Tensor qkv_b = in.take(from + "/linear_0/bias", {3 * d});
    q_w = part(qkv_w, 0, d), k_w = part(qkv_w, 1, d), v_w = part(qkv_w, 2, d);
    q_b = part(qkv_b, 0, d), k_b = part(qkv_b, 1, d), v_b = part(qkv_b, 2, d);
  }
  // A key bias adds q.b_k to every score of a query: softmax ignores it.
  if (any_nonzero(k_b)) {
    notes.push_back(from +
                    ": the key bias is not zero; dropped (HF's k_proj has none, and a "
                    "key bias does not change attention)");
  }
  out.add(to + ".k_proj.weight", k_w);
  out.add(to + ".v_proj.weight", v_w);
  out.add(to + ".v_proj.bias", v_b);
  out.add(to + ".q_proj.weight", q_w);
  out.add(to + ".q_proj.bias", q_b);
  const std::string out_linear = from + (cross ? "/linear_2" : "/linear_1");
  add_linear(in, out, out_linear, to + ".out_proj", d, d);
}

void add_ffn(Ct2WhisperReader& in, HfTensors& out, const std::string& from, const std::string& to,
             int64_t d, int64_t ffn) {
  add_linear(in, out, from + "/linear_0", to + ".fc1", ffn, d);
  add_linear(in, out, from + "/linear_1", to + ".fc2", d, ffn);
  add_layer_norm(in, out, from + "/layer_norm", to + ".final_layer_norm", d);
}

std::vector<int64_t> id_list(const json& config, const char* key, const fs::path& path) {
  OASR_CHECK(config.contains(key) && config.at(key).is_array(), kCorruptFile, path.string(),
             ": lacks the list \"", key,
             "\" (CTranslate2's Whisper converter writes it from the HF generation config's ",
             std::string(key) == "suppress_ids" ? "suppress_tokens" : "begin_suppress_tokens",
             "; add it)");
  std::vector<int64_t> out;
  for (const json& id : config.at(key)) {
    OASR_CHECK(id.is_number_integer(), kCorruptFile, path.string(), ": \"", key, "\" holds ",
               id.dump(), ", which is not a token id");
    out.push_back(id.get<int64_t>());
  }
  return out;
}

// generation_config.json's content for a CTranslate2 model, from its
// config.json and the tokenizer's special tokens.
json ct2_generation_json(const json& ct2_config, const fs::path& config_path,
                         const std::map<std::string, int64_t>& special,
                         const WhisperConfig& network, const fs::path& tokenizer_path) {
  auto token = [&](const char* spelling) {
    const auto it = special.find(spelling);
    OASR_CHECK(it != special.end(), kCorruptFile, tokenizer_path.string(), ": has no ", spelling,
               " token; a Whisper tokenizer.json lists it among its added tokens (copy the one "
               "of the model's HF repository)");
    return it->second;
  };
  json gen;
  if (ct2_config.contains("alignment_heads") && ct2_config["alignment_heads"].is_array()) {
    gen["alignment_heads"] = ct2_config["alignment_heads"];
  }
  gen["begin_suppress_tokens"] = id_list(ct2_config, "suppress_ids_begin", config_path);
  gen["bos_token_id"] = token("<|endoftext|>");
  gen["decoder_start_token_id"] = token("<|startoftranscript|>");
  gen["eos_token_id"] = token("<|endoftext|>");
  gen["pad_token_id"] = token("<|endoftext|>");
  gen["no_timestamps_token_id"] = token("<|notimestamps|>");
  const bool multilingual = network.vocab_size >= kFirstMultilingualVocab;
  gen["is_multilingual"] = multilingual;
  if (multilingual) {
    const int64_t sot = token("<|startoftranscript|>");
    const int64_t translate = token("<|translate|>");
    json languages = json::object();
    for (const auto& [spelling, id] : special) {
      if (id > sot && id < translate) languages[spelling] = id;
    }
    gen["lang_to_id"] = languages;
    gen["task_to_id"] = {{"transcribe", token("<|transcribe|>")}, {"translate", translate}};
  }
  gen["max_length"] = network.max_target_positions;
  if (special.count("<|startofprev|>")) gen["prev_sot_token_id"] = special.at("<|startofprev|>");
  gen["suppress_tokens"] = id_list(ct2_config, "suppress_ids", config_path);
  return gen;
}

}  // namespace

bool is_ct2_whisper_dir(const fs::path& dir) {
  return is_file(dir / "model.bin") && peek_spec_name(dir / "model.bin") == kCt2WhisperSpecName;
}

Ct2WhisperDir read_ct2_whisper_dir(const fs::path& dir) {
  std::error_code error;
  OASR_CHECK(fs::is_directory(dir, error), kNotFound, dir.string(), ": no such directory");
  const fs::path model_path = dir / "model.bin";
  const fs::path config_path = dir / "config.json";
  const fs::path tokenizer_path = dir / "tokenizer.json";
  OASR_CHECK(is_file(model_path), kNotFound, dir.string(),
             ": no model.bin, so not a CTranslate2 model directory");
  const io::Ct2Model model = io::Ct2Model::open(model_path);
  OASR_CHECK(model.spec_name() == kCt2WhisperSpecName, kUnsupported, model_path.string(),
             ": holds a CTranslate2 ",
             model.spec_name().empty() ? std::string("model without a spec name")
                                       : "\"" + model.spec_name() + "\"",
             ", not a \"", kCt2WhisperSpecName, "\"; only Whisper models are converted");
  OASR_CHECK(model.spec_revision() <= kNewestWhisperRevision, kUnsupported, model_path.string(),
             ": WhisperSpec revision ", model.spec_revision(), " is newer than this converter (1..",
             kNewestWhisperRevision, "); convert the HF model with a CTranslate2 4.x release");
  OASR_CHECK(is_file(config_path), kNotFound, dir.string(),
             ": no config.json beside model.bin (CTranslate2 >= 3.0 writes one with "
             "suppress_ids, suppress_ids_begin, lang_ids and alignment_heads)");
  OASR_CHECK(is_file(tokenizer_path), kNotFound, dir.string(),
             ": no tokenizer.json; faster-whisper directories carry one (copy the tokenizer.json "
             "of the model's HF repository, e.g. openai/whisper-<size>, into the directory)");
  const json ct2_config = io::read_json_file(config_path);
  OASR_CHECK(ct2_config.is_object(), kCorruptFile, config_path.string(), ": is not a JSON object");

  Ct2WhisperDir out;
  out.binary_version = model.binary_version();
  out.spec_revision = model.spec_revision();
  out.variables = model.variables().size();
  out.aliases = model.aliases().size();
  for (const io::Ct2VariableInfo& info : model.variables()) {
    ++out.dtype_counts[io::ct2_dtype_name(info.dtype)];
  }
  WhisperSource& source = out.source;
  source.dir = dir;
  source.weights_path = model_path;
  source.tokenizer_json = tokenizer_path;
  Ct2WhisperReader in(model);

  // The sizes, from the shapes and the two head counts.
  WhisperConfig& network = source.config;
  const Shape* conv1 = in.shape_of("encoder/conv1/weight");
  const Shape* embeddings = in.shape_of("decoder/embeddings/weight");
  const Shape* encoder_positions = in.shape_of("encoder/position_encodings/encodings");
  const Shape* decoder_positions = in.shape_of("decoder/position_encodings/encodings");
  const Shape* encoder_ffn = in.shape_of("encoder/layer_0/ffn/linear_0/weight");
  const Shape* decoder_ffn = in.shape_of("decoder/layer_0/ffn/linear_0/weight");
  network.encoder_attention_heads = in.scalar("encoder/num_heads");
  network.decoder_attention_heads = in.scalar("decoder/num_heads");
  in.throw_if_defects();  // a missing essential is reported before any arithmetic on it
  OASR_CHECK(conv1->size() == 3 && embeddings->size() == 2 && encoder_positions->size() == 2 &&
                 decoder_positions->size() == 2 && encoder_ffn->size() == 2 &&
                 decoder_ffn->size() == 2,
             kCorruptFile, model_path.string(),
             ": conv1, embeddings, position encodings or ffn weights have the wrong rank");
  network.d_model = (*conv1)[0];
  network.num_mel_bins = (*conv1)[1];
  network.vocab_size = (*embeddings)[0];
  network.max_source_positions = (*encoder_positions)[0];
  network.max_target_positions = (*decoder_positions)[0];
  network.encoder_ffn_dim = (*encoder_ffn)[0];
  network.decoder_ffn_dim = (*decoder_ffn)[0];
  network.encoder_layers = count_layers(model, "encoder");
  network.decoder_layers = count_layers(model, "decoder");
  const int64_t gelu = model.spec_revision() >= 3 ? kGeluId : kGeluIdBeforeRevision3;
  in.expect_flag("decoder/activation", gelu, "GELU, Whisper's activation");
  in.expect_flag("decoder/pre_norm", 1, "pre-norm layers");
  in.expect_flag("decoder/alibi", 0, "no ALiBi");
  in.expect_flag("decoder/start_from_zero_embedding", 0, "Whisper's decoder embeds the prompt");
  network.scale_embedding =
      in.has("decoder/scale_embeddings") && in.scalar("decoder/scale_embeddings") != 0;
  network.validate(model_path.string() + " (sizes read from its tensor shapes)");
  const int64_t d = network.d_model;

  HfTensors hf;
  const std::string enc = "model.encoder";
  hf.add(enc + ".conv1.weight", in.take("encoder/conv1/weight", {d, network.num_mel_bins, 3}));
  hf.add(enc + ".conv1.bias", in.take("encoder/conv1/bias", {d}));
  hf.add(enc + ".conv2.weight", in.take("encoder/conv2/weight", {d, d, 3}));
  hf.add(enc + ".conv2.bias", in.take("encoder/conv2/bias", {d}));
  hf.add(enc + ".embed_positions.weight",
         in.take("encoder/position_encodings/encodings", {network.max_source_positions, d}));
  for (int64_t i = 0; i < network.encoder_layers; ++i) {
    const std::string from = "encoder/layer_" + std::to_string(i);
    const std::string to = enc + ".layers." + std::to_string(i);
    add_attention(in, hf, from + "/self_attention", to + ".self_attn", d, false, source.notes);
    add_layer_norm(in, hf, from + "/self_attention/layer_norm", to + ".self_attn_layer_norm", d);
    add_ffn(in, hf, from + "/ffn", to, d, network.encoder_ffn_dim);
  }
  add_layer_norm(in, hf, "encoder/layer_norm", enc + ".layer_norm", d);

  const std::string dec = "model.decoder";
  const Tensor embed = in.take("decoder/embeddings/weight", {network.vocab_size, d});
  hf.add(dec + ".embed_tokens.weight", embed);
  hf.add(dec + ".embed_positions.weight",
         in.take("decoder/position_encodings/encodings", {network.max_target_positions, d}));
  for (int64_t i = 0; i < network.decoder_layers; ++i) {
    const std::string from = "decoder/layer_" + std::to_string(i);
    const std::string to = dec + ".layers." + std::to_string(i);
    add_attention(in, hf, from + "/self_attention", to + ".self_attn", d, false, source.notes);
    add_layer_norm(in, hf, from + "/self_attention/layer_norm", to + ".self_attn_layer_norm", d);
    add_attention(in, hf, from + "/attention", to + ".encoder_attn", d, true, source.notes);
    add_layer_norm(in, hf, from + "/attention/layer_norm", to + ".encoder_attn_layer_norm", d);
    add_ffn(in, hf, from + "/ffn", to, d, network.decoder_ffn_dim);
  }
  add_layer_norm(in, hf, "decoder/layer_norm", dec + ".layer_norm", d);

  // The output projection must be the embedding (HF ties the two).
  if (in.has("decoder/projection/weight") &&
      model.resolve("decoder/projection/weight") != model.resolve("decoder/embeddings/weight")) {
    const Tensor projection = in.take("decoder/projection/weight", {network.vocab_size, d});
    if (projection.defined() && embed.defined()) {
      const Tensor a = projection.to(DType::kF32).contiguous();
      const Tensor b = embed.to(DType::kF32).contiguous();
      OASR_CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0, kUnsupported,
                 model_path.string(),
                 ": decoder/projection/weight differs from decoder/embeddings/weight (an untied "
                 "output projection); oasr's Whisper ties proj_out to embed_tokens as every "
                 "released Whisper does");
    }
  } else {
    in.ignore("decoder/projection/weight");
  }
  // Settings CTranslate2 keeps for other decoders; meaningless here.
  in.finish({"decoder/alignment_layer", "decoder/alignment_heads",
             "decoder/alibi_use_positive_positions", "decoder/scale_alibi"});
  if (in.dequantized_ > 0) {
    source.notes.push_back(std::to_string(in.dequantized_) +
                           " quantized weights dequantized to float32 (q / scale)");
  }

  const std::map<std::string, int64_t> special = read_whisper_special_tokens(source);
  const json generation =
      ct2_generation_json(ct2_config, config_path, special, network, tokenizer_path);
  source.generation = resolve_whisper_generation(&generation, json::object(), special, network,
                                                 dir.string(), source.notes);
  source.weights = std::make_shared<OrderedTensorSource>(std::move(hf.list));
  return out;
}

}  // namespace oasr::models
