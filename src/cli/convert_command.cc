// `oasr convert SRC DST [--dtype D] [--force]`: writes a checkpoint directory (WeNet
// experiment directory, a .pt inside one, or a native directory) as oasr's
// native format v1 (models/native_checkpoint.h).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "core/dtype.h"
#include "core/error.h"
#include "models/native_checkpoint.h"

namespace oasr::cli {

namespace {

struct ConvertOptions {
  std::string source;
  std::string destination;
  bool force = false;
  std::string dtype;  // empty: keep the source's dtypes
};

void run_convert(const ConvertOptions& options) {
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
      "native checkpoint directory (oasr_config.json, model.safetensors, units.txt)");
  app->add_option("src", options->source,
                  "WeNet directory (train.yaml, final.pt / avg_N.pt, units.txt, global_cmvn), a "
                  ".pt inside one, or a native directory")
      ->required();
  app->add_option("dst", options->destination, "the native directory to write")->required();
  app->add_option("--dtype", options->dtype,
                  "store floating weights as float32, float16 or bfloat16 (default: as the source; "
                  "the global CMVN stays float32)");
  app->add_flag("--force", options->force,
                "replace DST when it is an existing oasr checkpoint directory");
  return {app, [options] { run_convert(*options); }};
}

}  // namespace oasr::cli
