// Whisper's architecture descriptor (models/architecture.h): Hugging Face
// layout directories (config.json with model_type "whisper"), which is also
// what `oasr convert --from ct2|hf` writes.
#include <sstream>

#include "core/error.h"
#include "models/architecture.h"
#include "models/native_dir.h"
#include "models/whisper/whisper_convert.h"
#include "models/whisper/whisper_dir.h"
#include "models/whisper/whisper_materialize.h"
#include "models/whisper/whisper_recognizer.h"

namespace oasr::models {
namespace {

namespace fs = std::filesystem;

// What `oasr convert` prints after writing `source` (read from `origin`).
std::string convert_report(const WhisperSource& source, const ConvertRequest& request,
                           const std::string& origin) {
  const WhisperConfig& c = source.config;
  const WhisperGeneration& g = source.generation;
  std::ostringstream out;
  out << "wrote " << request.destination.string()
      << " (oasr Whisper directory: Hugging Face layout + oasr_config.json) from " << origin << "\n"
      << "  model: whisper d_model " << c.d_model << ", " << c.encoder_layers << " encoder + "
      << c.decoder_layers << " decoder layers, " << c.encoder_attention_heads << " heads, ffn "
      << c.encoder_ffn_dim << ", " << c.num_mel_bins << " mel bins\n"
      << "  tensors: " << source.weights->names().size()
      << (request.dtype ? " (stored as " + request.dtype_flag + ")" : " (dtypes as the source)")
      << "\n"
      << "  vocabulary: " << c.vocab_size << " tokens ("
      << (g.is_multilingual ? "multilingual, " + std::to_string(g.lang_to_id.size()) + " languages"
                            : std::string("English-only"))
      << "), tokenizer "
      << (source.tokenizer_json.empty() ? "vocab.json + merges.txt" : "tokenizer.json") << "\n"
      << "  generation: decoder_start " << g.decoder_start_token_id << ", eos " << g.eos_token_id
      << ", no_timestamps " << g.no_timestamps_token_id << ", " << g.suppress_tokens.size()
      << " suppressed tokens, max_length " << g.max_length << "\n";
  for (const std::string& note : source.notes) out << "  note: " << note << "\n";
  return out.str();
}

std::string write_converted(const WhisperSource& source, const ConvertRequest& request,
                            const std::string& origin) {
  OASR_CHECK(source.quantization.is_null(), kUnsupported, request.source.string(),
             " is a Whisper checkpoint quantized by oasr quantize (format_version 2); serve it "
             "as it is, or convert its full-precision original");
  WhisperWriteOptions write_options;
  write_options.force = request.force;
  write_options.dtype = request.dtype;
  write_options.converted_from = origin;
  save_whisper_dir(source, request.destination, write_options);
  return convert_report(source, request, origin);
}

// A directory holding a CTranslate2 model.bin: a Whisper one by its header,
// or any model.bin that no WeNet (train.yaml) or oasr directory explains --
// the reader then says what the header holds.
SourceLayout ct2_layout() {
  SourceLayout layout;
  layout.from = "ct2";
  layout.description = "a CTranslate2 / faster-whisper Whisper directory";
  layout.detect = [](const fs::path& dir) {
    std::error_code error;
    if (!fs::is_directory(dir, error)) return false;
    if (is_ct2_whisper_dir(dir)) return true;
    return fs::is_regular_file(dir / "model.bin", error) &&
           !fs::exists(dir / "train.yaml", error) && !fs::exists(dir / kNativeConfigName, error);
  };
  layout.convert = [](const ConvertRequest& request) {
    Ct2WhisperDir ct2 = read_ct2_whisper_dir(request.source);
    std::string dtypes;
    for (const auto& [name, count] : ct2.dtype_counts) {
      dtypes += (dtypes.empty() ? "" : ", ") + std::to_string(count) + " " + name;
    }
    const std::string origin = "ctranslate2 " + ct2.source.weights_path.string() +
                               " (binary version " + std::to_string(ct2.binary_version) +
                               ", WhisperSpec revision " + std::to_string(ct2.spec_revision) +
                               "; " + std::to_string(ct2.variables) + " variables: " + dtypes +
                               "; " + std::to_string(ct2.aliases) + " aliases)";
    return write_converted(ct2.source, request, origin);
  };
  return layout;
}

// A Hugging Face Whisper directory (config.json model_type "whisper"),
// oasr's own Whisper directories included.
SourceLayout hf_layout() {
  SourceLayout layout;
  layout.from = "hf";
  layout.description = "a Hugging Face Whisper directory";
  layout.detect = [](const fs::path& dir) { return is_whisper_dir(dir); };
  layout.convert = [](const ConvertRequest& request) {
    const WhisperSource source = load_whisper_dir(request.source);
    return write_converted(source, request, "huggingface " + source.weights_path.string());
  };
  return layout;
}

// A full-precision Whisper directory opened for oasr quantize; writes the
// same directory with 8-bit weights and oasr_config.json format_version 2.
class WhisperQuantizableCheckpoint final : public QuantizableCheckpoint {
 public:
  explicit WhisperQuantizableCheckpoint(const fs::path& path) : source_(load_whisper_dir(path)) {
    OASR_CHECK(source_.quantization.is_null(), kInvalidArgument, path.string(),
               " is already quantized (format_version 2); quantize its full-precision original");
    MaterializeOptions master;
    master.dtype = DType::kF32;
    master.bind = false;
    master_ = materialize_whisper_model(source_, {}, master).model;
    layout_ = whisper_quantization_layout(source_.config);
  }
  Module& master() override { return *master_; }
  const quant::QuantLayout& layout() const override { return layout_; }
  std::shared_ptr<const TensorSource> weights() const override { return source_.weights; }
  nlohmann::json provenance() const override {
    return {{"format", source_.converted_from.empty() ? "huggingface" : "oasr whisper"},
            {"checkpoint", source_.weights_path.filename().string()}};
  }
  // Greedy decoding, as the engine decodes by default: the decoder sees its
  // own tokens step by step through the KV cache, the encoder each 30 s window.
  std::vector<std::pair<std::string, std::string>> calibration_decode() const override {
    return {{"decode_method", "greedy_search"}};
  }
  std::string calibration_decode_description() const override {
    return "greedy_search, one utterance at a time (one 30 s window each)";
  }
  void write_quantized(
      std::shared_ptr<const TensorSource> weights, const nlohmann::json& spec,
      const std::string& note, const fs::path& destination, bool force,
      const std::vector<std::pair<std::string, std::string>>& extra_files) const override {
    WhisperSource written = source_;
    written.weights = std::move(weights);
    WhisperWriteOptions write;
    write.force = force;
    write.converted_from = source_.converted_from.empty()
                               ? "huggingface " + source_.weights_path.string()
                               : source_.converted_from;
    write.quantization = spec;
    write.notes = source_.notes;
    write.notes.push_back(note);
    write.extra_files = extra_files;
    save_whisper_dir(written, destination, write);
  }

 private:
  WhisperSource source_;
  std::unique_ptr<WhisperModel> master_;
  quant::QuantLayout layout_;
};

}  // namespace

Architecture whisper_architecture() {
  Architecture architecture;
  architecture.name = kWhisperArchitectureName;
  architecture.display_name = "Whisper";
  architecture.serves_cuda = true;
  architecture.decodes_timestamps = true;
  architecture.detect = [](const std::filesystem::path& path) { return is_whisper_dir(path); };
  architecture.rejection = whisper_dir_rejection;
  architecture.looks_for =
      "a directory whose config.json has model_type whisper (Hugging Face's layout, "
      "which oasr's Whisper directories keep)";
  architecture.make_recognizer = engine::whisper_recognizer_factory();
  architecture.decode_options = engine::whisper_decode_options();
  architecture.materialize = [](const std::filesystem::path& path,
                                const quant::QuantizationConfig& quantization,
                                const MaterializeOptions& options) {
    MaterializedWhisper loaded =
        materialize_whisper_model(load_whisper_dir(path), quantization, options);
    return MaterializedModel{std::move(loaded.model), std::move(loaded.spec)};
  };
  architecture.quantization_layout = [](const Module& model) {
    const auto* whisper = dynamic_cast<const WhisperModel*>(&model);
    OASR_CHECK(whisper != nullptr, kInternal, "the Whisper quantization layout got a ",
               model.type_name(), " model, not a WhisperModel");
    return whisper_quantization_layout(whisper->config());
  };
  architecture.source_layouts = {ct2_layout(), hf_layout()};
  architecture.open_for_quantization = [](const fs::path& path) {
    return std::unique_ptr<QuantizableCheckpoint>(
        std::make_unique<WhisperQuantizableCheckpoint>(path));
  };
  return architecture;
}

}  // namespace oasr::models
