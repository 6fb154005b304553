// `oasr convert SRC DST [--force]`: writes a checkpoint directory (WeNet
// experiment directory, a .pt inside one, or a native directory) as oasr's
// native format v1 (models/native_checkpoint.h).
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "models/native_checkpoint.h"

namespace oasr::cli {

namespace {

struct ConvertOptions {
  std::string source;
  std::string destination;
  bool force = false;
};

void run_convert(const ConvertOptions& options) {
  const models::ModelSource source = models::load_checkpoint_dir(options.source);
  models::save_native_checkpoint(source, options.destination, {.force = options.force});
  const models::WenetConfig& config = source.config;
  std::cout << "wrote " << options.destination << " (oasr native format v1) from "
            << models::to_string(source.format) << " " << source.weights_path.string() << "\n"
            << "  tensors: " << source.weights->names().size() << "\n"
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
  app->add_flag("--force", options->force,
                "replace DST when it is an existing oasr checkpoint directory");
  return {app, [options] { run_convert(*options); }};
}

}  // namespace oasr::cli
