// The U2++ Conformer's architecture descriptor (models/architecture.h): native
// oasr directories whose config says "u2pp_conformer", WeNet experiment
// directories (train.yaml + *.pt) and WeNet .pt files.
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "models/architecture.h"
#include "models/u2pp/materialize.h"
#include "models/u2pp/native_checkpoint.h"
#include "models/u2pp/u2pp_recognizer.h"

namespace oasr::models {
namespace {

namespace fs = std::filesystem;

bool native_config_names_u2pp(const fs::path& dir) {
  std::ifstream in(dir / kNativeConfigName);
  if (!in) return false;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return false;
  const auto named = config.find("architecture");
  return named != config.end() && named->is_string() && *named == kU2ppArchitectureName;
}

// A WeNet experiment directory (train.yaml) or a .pt file inside one.
bool looks_like_wenet(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    return !looks_like_native_dir(path) && fs::is_regular_file(path / "train.yaml", error);
  }
  return path.extension() == ".pt" && fs::is_regular_file(path, error);
}

bool detect_u2pp(const fs::path& path) {
  if (looks_like_native_dir(path)) return native_config_names_u2pp(path);
  return looks_like_wenet(path);
}

// `oasr convert` of a WeNet or native directory: a native v1 (or, for a
// quantized source, v2) directory.
std::string convert_u2pp(const ConvertRequest& request) {
  const ModelSource source = load_checkpoint_dir(request.source);
  NativeWriteOptions write_options{.force = request.force};
  if (request.dtype) {
    // A quantized checkpoint's fp32 scales are part of its format: a cast
    // would write a checkpoint the loader refuses.
    OASR_CHECK(source.quantization.is_null(), kInvalidArgument, "--dtype ", request.dtype_flag,
               ": ", request.source.string(),
               " is a quantized checkpoint; its tensors keep the dtypes of its quantization spec");
    write_options.weight_dtype = request.dtype;
  }
  save_native_checkpoint(source, request.destination, write_options);
  const WenetConfig& config = source.config;
  std::ostringstream out;
  out << "wrote " << request.destination.string() << " (oasr native format v1) from "
      << to_string(source.format) << " " << source.weights_path.string() << "\n"
      << "  tensors: " << source.weights->names().size()
      << (request.dtype ? " (floating weights stored as " + request.dtype_flag + ")" : "") << "\n"
      << "  vocabulary: " << config.model.vocab_size << " units ("
      << tokenizer_type_name(config.tokenizer.type) << ")\n"
      << "  cmvn: " << (source.cmvn.defined() ? "global (stored as tensors)" : "none") << "\n";
  for (const std::string& note : source.notes) out << "  converted: " << note << "\n";
  return out.str();
}

SourceLayout native_layout() {
  SourceLayout layout;
  layout.from = "native";
  layout.description = "an oasr U2++ directory";
  layout.detect = [](const fs::path& path) { return native_config_names_u2pp(path); };
  layout.convert = [](const ConvertRequest& request) {
    OASR_CHECK(looks_like_native_dir(request.source), kInvalidArgument,
               "--from native: ", request.source.string(), " has no ", kNativeConfigName);
    return convert_u2pp(request);
  };
  return layout;
}

SourceLayout wenet_layout() {
  SourceLayout layout;
  layout.from = "wenet";
  layout.description = "a WeNet experiment directory or a .pt inside one";
  layout.detect = looks_like_wenet;
  layout.convert = [](const ConvertRequest& request) {
    OASR_CHECK(!looks_like_native_dir(request.source), kInvalidArgument,
               "--from wenet: ", request.source.string(), " is an oasr native directory (it holds ",
               kNativeConfigName, "); use --from native");
    return convert_u2pp(request);
  };
  return layout;
}

// A WeNet or native U2++ checkpoint opened for oasr quantize; writes a
// native format_version 2 directory.
class U2ppQuantizableCheckpoint final : public QuantizableCheckpoint {
 public:
  explicit U2ppQuantizableCheckpoint(const fs::path& path) : source_(load_checkpoint_dir(path)) {
    OASR_CHECK(source_.quantization.is_null(), kInvalidArgument, path.string(),
               " is already quantized (format_version 2); quantize its full-precision original");
    MaterializeOptions master;
    master.dtype = DType::kF32;
    master.bind = false;
    master_ = materialize_u2pp_model(source_, {}, master).model;
    layout_ = u2pp_quantization_layout(source_.config.model);
  }
  Module& master() override { return *master_; }
  const quant::QuantLayout& layout() const override { return layout_; }
  std::shared_ptr<const TensorSource> weights() const override { return source_.weights; }
  nlohmann::json provenance() const override {
    return {{"format", to_string(source_.format)},
            {"checkpoint", source_.weights_path.filename().string()}};
  }
  // The decoder is calibrated by rescoring, the way it decodes, over full
  // context; with reverse_weight 0 a bidirectional decoder's right-to-left
  // half would never run and stay uncalibrated, so both directions rescore.
  std::vector<std::pair<std::string, std::string>> calibration_decode() const override {
    std::vector<std::pair<std::string, std::string>> decode = {
        {"decode_method", "attention_rescoring"}, {"chunk_size", "-1"}};
    const U2ppDecoderConfig& decoder = source_.config.model.decoder;
    if (decoder.type == U2ppDecoderType::kBiTransformer && decoder.r_num_blocks > 0) {
      decode.emplace_back("reverse_weight", "0.3");
    }
    return decode;
  }
  std::string calibration_decode_description() const override {
    return "attention_rescoring, offline, one unpadded utterance at a time";
  }
  void write_quantized(
      std::shared_ptr<const TensorSource> weights, const nlohmann::json& spec,
      const std::string& note, const fs::path& destination, bool force,
      const std::vector<std::pair<std::string, std::string>>& extra_files) const override {
    ModelSource written = source_;
    written.weights = std::move(weights);
    written.quantization = spec;
    written.notes.push_back(note);
    NativeWriteOptions write;
    write.force = force;
    write.extra_files = extra_files;
    save_native_checkpoint(written, destination, write);
  }

 private:
  ModelSource source_;
  std::unique_ptr<U2ppModel> master_;
  quant::QuantLayout layout_;
};

const U2ppModel& as_u2pp(const Module& model) {
  const auto* u2pp = dynamic_cast<const U2ppModel*>(&model);
  OASR_CHECK(u2pp != nullptr, kInternal, "the U2++ quantization layout got a ", model.type_name(),
             " model, not a U2ppModel");
  return *u2pp;
}

}  // namespace

Architecture u2pp_architecture() {
  Architecture architecture;
  architecture.name = kU2ppArchitectureName;
  architecture.display_name = "U2++";
  architecture.detect = detect_u2pp;
  architecture.looks_for = std::string("an oasr directory whose ") + kNativeConfigName + " names " +
                           kU2ppArchitectureName +
                           ", a WeNet experiment directory (train.yaml) or a .pt file inside one";
  architecture.make_recognizer = engine::u2pp_recognizer_factory();
  architecture.decode_options = engine::u2pp_decode_options();
  architecture.materialize = [](const fs::path& path, const quant::QuantizationConfig& quantization,
                                const MaterializeOptions& options) {
    MaterializedU2pp loaded =
        materialize_u2pp_model(load_checkpoint_dir(path), quantization, options);
    return MaterializedModel{std::move(loaded.model), std::move(loaded.spec)};
  };
  architecture.quantization_layout = [](const Module& model) {
    return u2pp_quantization_layout(as_u2pp(model).config());
  };
  architecture.source_layouts = {native_layout(), wenet_layout()};
  architecture.open_for_quantization = [](const fs::path& path) {
    return std::unique_ptr<QuantizableCheckpoint>(
        std::make_unique<U2ppQuantizableCheckpoint>(path));
  };
  return architecture;
}

}  // namespace oasr::models
