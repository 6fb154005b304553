// `oasr convert SRC DST [--from F] [--dtype D] [--force]`: writes a checkpoint
// directory (WeNet experiment directory, a .pt inside one, or a native
// directory) as oasr's native format v1 (models/native_checkpoint.h); a
// Whisper model (a CTranslate2 / faster-whisper directory, or an HF one) as
// oasr's Whisper directory, the HF layout (models/whisper_convert.h).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "core/dtype.h"
#include "core/error.h"
#include "models/native_checkpoint.h"
#include "models/whisper_convert.h"
#include "models/whisper_dir.h"

namespace oasr::cli {

namespace {

struct ConvertOptions {
  std::string source;
  std::string destination;
  bool force = false;
  std::string dtype;  // empty: keep the source's dtypes
  std::string from = "auto";
};

// Which reader `--from auto` picks: a directory holding a CTranslate2
// model.bin is CTranslate2 (its header then decides whether it is a Whisper
// model the converter reads), one whose config.json says model_type
// "whisper" is HF, anything else what load_checkpoint_dir accepts.
std::string detect_source_format(const std::string& source) {
  std::error_code error;
  const std::filesystem::path dir(source);
  if (!std::filesystem::is_directory(dir, error)) return "checkpoint";
  if (models::is_ct2_whisper_dir(dir)) return "ct2";
  if (std::filesystem::is_regular_file(dir / "model.bin", error) &&
      !std::filesystem::exists(dir / "train.yaml", error) &&
      !std::filesystem::exists(dir / models::kNativeConfigName, error)) {
    return "ct2";
  }
  if (models::is_whisper_dir(dir)) return "hf";
  return "checkpoint";
}

void run_convert_whisper(const ConvertOptions& options, const std::string& from) {
  models::WhisperWriteOptions write_options;
  write_options.force = options.force;
  if (!options.dtype.empty()) {
    const std::optional<DType> parsed = parse_dtype(options.dtype);
    const DType dtype = parsed.value_or(DType::kI64);
    OASR_CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16,
               kInvalidArgument, "--dtype ", options.dtype,
               ": Whisper weights are stored as float32, float16 or bfloat16");
    write_options.dtype = dtype;
  }
  models::WhisperSource source;
  std::string origin;
  if (from == "ct2") {
    models::Ct2WhisperDir ct2 = models::read_ct2_whisper_dir(options.source);
    std::string dtypes;
    for (const auto& [name, count] : ct2.dtype_counts) {
      dtypes += (dtypes.empty() ? "" : ", ") + std::to_string(count) + " " + name;
    }
    origin = "ctranslate2 " + ct2.source.weights_path.string() + " (binary version " +
             std::to_string(ct2.binary_version) + ", WhisperSpec revision " +
             std::to_string(ct2.spec_revision) + "; " + std::to_string(ct2.variables) +
             " variables: " + dtypes + "; " + std::to_string(ct2.aliases) + " aliases)";
    source = std::move(ct2.source);
  } else {
    source = models::load_whisper_dir(options.source);
    origin = "huggingface " + source.weights_path.string();
  }
  write_options.converted_from = origin;
  models::save_whisper_dir(source, options.destination, write_options);

  const models::WhisperConfig& c = source.config;
  const models::WhisperGeneration& g = source.generation;
  std::cout
      << "wrote " << options.destination
      << " (oasr Whisper directory: Hugging Face layout + oasr_config.json) from " << origin << "\n"
      << "  model: whisper d_model " << c.d_model << ", " << c.encoder_layers << " encoder + "
      << c.decoder_layers << " decoder layers, " << c.encoder_attention_heads << " heads, ffn "
      << c.encoder_ffn_dim << ", " << c.num_mel_bins << " mel bins\n"
      << "  tensors: " << source.weights->names().size()
      << (options.dtype.empty() ? " (dtypes as the source)" : " (stored as " + options.dtype + ")")
      << "\n"
      << "  vocabulary: " << c.vocab_size << " tokens ("
      << (g.is_multilingual ? "multilingual, " + std::to_string(g.lang_to_id.size()) + " languages"
                            : std::string("English-only"))
      << "), tokenizer "
      << (source.tokenizer_json.empty() ? "vocab.json + merges.txt" : "tokenizer.json") << "\n"
      << "  generation: decoder_start " << g.decoder_start_token_id << ", eos " << g.eos_token_id
      << ", no_timestamps " << g.no_timestamps_token_id << ", " << g.suppress_tokens.size()
      << " suppressed tokens, max_length " << g.max_length << "\n";
  for (const std::string& note : source.notes) std::cout << "  note: " << note << "\n";
}

void run_convert(const ConvertOptions& options) {
  OASR_CHECK(options.from == "auto" || options.from == "ct2" || options.from == "hf" ||
                 options.from == "wenet" || options.from == "native",
             kInvalidArgument, "--from ", options.from,
             ": expected auto, ct2 (CTranslate2 / faster-whisper Whisper), hf (Hugging Face "
             "Whisper), wenet or native");
  const std::string from =
      options.from == "auto" ? detect_source_format(options.source) : options.from;
  if (from == "ct2" || from == "hf") {
    run_convert_whisper(options, from);
    return;
  }
  OASR_CHECK(from != "native" || models::looks_like_native_dir(options.source), kInvalidArgument,
             "--from native: ", options.source, " has no ", models::kNativeConfigName);
  OASR_CHECK(from != "wenet" || !models::looks_like_native_dir(options.source), kInvalidArgument,
             "--from wenet: ", options.source, " is an oasr native directory (it holds ",
             models::kNativeConfigName, "); use --from native");
  const models::ModelSource source = models::load_checkpoint_dir(options.source);
  models::NativeWriteOptions write_options{.force = options.force};
  if (!options.dtype.empty()) {
    const std::optional<DType> parsed = parse_dtype(options.dtype);
    const DType dtype = parsed.value_or(DType::kI64);
    OASR_CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16,
               kInvalidArgument, "--dtype ", options.dtype,
               ": weights are stored as float32, float16 or bfloat16");
    // A quantized checkpoint's fp32 scales are part of its format: a cast
    // would write a checkpoint the loader refuses.
    OASR_CHECK(source.quantization.is_null(), kInvalidArgument, "--dtype ", options.dtype, ": ",
               options.source,
               " is a quantized checkpoint; its tensors keep the dtypes of its quantization spec");
    write_options.weight_dtype = dtype;
  }
  models::save_native_checkpoint(source, options.destination, write_options);
  const models::WenetConfig& config = source.config;
  std::cout << "wrote " << options.destination << " (oasr native format v1) from "
            << models::to_string(source.format) << " " << source.weights_path.string() << "\n"
            << "  tensors: " << source.weights->names().size()
            << (options.dtype.empty() ? "" : " (floating weights stored as " + options.dtype + ")")
            << "\n"
            << "  vocabulary: " << config.model.vocab_size << " units ("
            << models::tokenizer_type_name(config.tokenizer.type) << ")\n"
            << "  cmvn: " << (source.cmvn.defined() ? "global (stored as tensors)" : "none")
            << "\n";
  for (const std::string& note : source.notes) std::cout << "  converted: " << note << "\n";
}

}  // namespace

Command add_convert_command(CLI::App& parent) {
  auto options = std::make_shared<ConvertOptions>();
  CLI::App* app = parent.add_subcommand(
      "convert",
      "Write a checkpoint (WeNet experiment directory or .pt, or a native directory) as an oasr "
      "native checkpoint directory (oasr_config.json, model.safetensors, units.txt); a Whisper "
      "model (CTranslate2 / faster-whisper or Hugging Face) as oasr's Whisper directory (the "
      "Hugging Face layout plus oasr_config.json)");
  app->add_option("src", options->source,
                  "WeNet directory (train.yaml, final.pt / avg_N.pt, units.txt, global_cmvn), a "
                  ".pt inside one, a native directory, or a Whisper model directory "
                  "(CTranslate2 / faster-whisper, or Hugging Face)")
      ->required();
  app->add_option("dst", options->destination, "the native directory to write")->required();
  app->add_option("--from", options->from,
                  "source format: auto (default: a directory with a CTranslate2 model.bin is ct2, "
                  "one whose config.json says model_type whisper is hf), ct2, hf, wenet, native");
  app->add_option("--dtype", options->dtype,
                  "store floating weights as float32, float16 or bfloat16 (default: as the source; "
                  "the global CMVN stays float32)");
  app->add_flag("--force", options->force,
                "replace DST when it is an existing oasr checkpoint directory");
  return {app, [options] { run_convert(*options); }};
}

}  // namespace oasr::cli
