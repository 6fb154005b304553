// `oasr convert SRC DST [--from F] [--dtype D] [--force]`: writes a
// checkpoint in any layout an architecture registers (models/architecture.h,
// SourceLayout: WeNet or native U2++ directories, CTranslate2 / faster-whisper
// or Hugging Face Whisper directories) as that architecture's native oasr
// directory. --from auto asks the registry which layout SRC is.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "core/dtype.h"
#include "core/error.h"
#include "models/architecture.h"

namespace oasr::cli {

namespace {

struct ConvertOptions {
  std::string source;
  std::string destination;
  bool force = false;
  std::string dtype;  // empty: keep the source's dtypes
  std::string from = "auto";
};

void run_convert(const ConvertOptions& options) {
  const models::SourceLayout* layout = options.from == "auto"
                                           ? &models::source_layout_for(options.source)
                                           : models::find_source_layout(options.from);
  OASR_CHECK(layout != nullptr, kInvalidArgument, "--from ", options.from, ": expected auto, ",
             models::source_layout_list());
  models::ConvertRequest request;
  request.source = options.source;
  request.destination = options.destination;
  request.force = options.force;
  if (!options.dtype.empty()) {
    const std::optional<DType> parsed = parse_dtype(options.dtype);
    const DType dtype = parsed.value_or(DType::kI64);
    OASR_CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16,
               kInvalidArgument, "--dtype ", options.dtype,
               ": weights are stored as float32, float16 or bfloat16");
    request.dtype = dtype;
    request.dtype_flag = options.dtype;
  }
  std::cout << layout->convert(request) << std::flush;
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
                  "source layout: auto (default: the layout the checkpoint is detected as), or " +
                      models::source_layout_list());
  app->add_option("--dtype", options->dtype,
                  "store floating weights as float32, float16 or bfloat16 (default: as the source; "
                  "the global CMVN stays float32)");
  app->add_flag("--force", options->force,
                "replace DST when it is an existing oasr checkpoint directory");
  return {app, [options] { run_convert(*options); }};
}

}  // namespace oasr::cli
