// `oasr quantize SRC DST --recipe int8_w8a8_rtn|fp8_w8a8_rtn [--ignore GLOB]
// [--module-types KINDS] [--force]`: loads a full-precision checkpoint,
// quantizes the selected layers' weights (round to nearest, per output
// channel, on the host in fp32; inputs stay per-token dynamic) through the
// one load sequence (models/materialize.h), and writes a
// native format_version 2 directory whose oasr_config.json carries the spec
// -- which layer has which scheme, with provenance (recipe, selection,
// skipped layers and why) -- so the checkpoint serves quantized with no flag.
// The directory is staged beside DST and renamed into place at the end
// (models::save_native_checkpoint), so an error or an interrupt leaves no
// half-written checkpoint.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "models/materialize.h"
#include "models/native_checkpoint.h"
#include "quant/export.h"

namespace oasr::cli {

namespace {

namespace fs = std::filesystem;

struct QuantizeOptions {
  std::string source;
  std::string destination;
  std::string recipe;
  std::vector<std::string> ignore;  // globs; each may be a comma list
  std::string module_types;         // empty: linear,pointwise_conv
  bool force = false;
};

struct Recipe {
  const char* name;
  const char* scheme;  // empty: needs calibration, not available yet
};

constexpr Recipe kRecipes[] = {
    {"int8_w8a8_rtn", "int8_w8a8"}, {"fp8_w8a8_rtn", "fp8_w8a8"},
    {"smoothquant_w8a8", ""},       {"smoothquant_fp8_w8a8", ""},
    {"smoothquant_w8a8_fused", ""}, {"smoothquant_fp8_w8a8_fused", ""},
};

// The scheme a recipe writes; refuses the calibrated recipes by name.
std::string scheme_of_recipe(const std::string& recipe) {
  for (const Recipe& r : kRecipes) {
    if (recipe != r.name) continue;
    OASR_CHECK(*r.scheme != '\0', kUnsupported, "--recipe ", recipe,
               " needs calibration, which arrives with calibration ([W1-D]); the recipes "
               "available now are int8_w8a8_rtn and fp8_w8a8_rtn (round-to-nearest weights, "
               "per-token activations, no calibration)");
    return r.scheme;
  }
  std::string known;
  for (const Recipe& r : kRecipes) known += (known.empty() ? "" : ", ") + std::string(r.name);
  OASR_THROW(kInvalidArgument, "unknown --recipe '", recipe, "'; known recipes: ", known);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    std::string part = text.substr(start, end - start);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) parts.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

quant::QuantizationConfig selection_config(const QuantizeOptions& options,
                                           const std::string& scheme) {
  quant::QuantizationConfig config;
  config.scheme = scheme;
  for (const std::string& glob : options.ignore) {
    for (std::string& part : split_commas(glob)) config.ignore.push_back(std::move(part));
  }
  if (!options.module_types.empty()) {
    config.module_types = quant::parse_layer_kinds(options.module_types);
    for (quant::LayerKind kind : *config.module_types) {
      // A convolution's input scale must be static, i.e. calibrated: no
      // round-to-nearest recipe can write one.
      OASR_CHECK(!quant::is_convolution(kind), kUnsupported, "--module-types ",
                 quant::to_string(kind),
                 ": a convolution needs a calibrated static input scale "
                 "(--calib-manifest), which --recipe ",
                 options.recipe,
                 " does not measure; convolutions arrive with calibration ([W1-D]) and are int8 "
                 "only. Use --module-types linear,pointwise_conv");
    }
  }
  config.validate();
  return config;
}

void check_destination(const QuantizeOptions& options) {
  std::error_code error;
  const fs::path destination(options.destination);
  if (!fs::exists(destination, error)) return;
  OASR_CHECK(options.force, kInvalidArgument, options.destination,
             ": exists; pass --force to replace it (only an oasr checkpoint directory is ever "
             "replaced)");
  const bool empty_dir = fs::is_directory(destination, error) &&
                         fs::directory_iterator(destination, error) == fs::directory_iterator();
  OASR_CHECK(empty_dir || models::looks_like_native_dir(destination), kInvalidArgument,
             options.destination, ": is not an oasr checkpoint directory (no ",
             models::kNativeConfigName,
             "), so it is not replaced even with --force; choose another destination");
}

void run_quantize(const QuantizeOptions& options) {
  // Everything that can be refused without reading weights is refused first.
  const std::string scheme = scheme_of_recipe(options.recipe);
  const quant::QuantizationConfig config = selection_config(options, scheme);
  check_destination(options);

  models::ModelSource source = models::load_checkpoint_dir(options.source);
  OASR_CHECK(source.quantization.is_null(), kInvalidArgument, options.source,
             " is already quantized (format_version 2); quantize its full-precision original");

  // The one load sequence (models/materialize.h), as online quantization: the
  // full-precision weights load, then each selected layer quantizes its own
  // fp32 weight on the host. Nothing is bound: the model is only written.
  models::MaterializeOptions load_options;
  load_options.dtype = DType::kF32;
  load_options.bind = false;
  load_options.recipe = options.recipe;
  models::MaterializedU2pp materialized =
      models::materialize_u2pp_model(source, config, load_options);
  quant::QuantizationSpec& spec = materialized.spec;
  OASR_CHECK(!spec.layers.empty(), kInvalidArgument, "--recipe ", options.recipe,
             " selects no layer of ", options.source,
             " (every candidate was ignored or skipped); check --ignore / --module-types");
  spec.online = false;  // the written checkpoint holds the quantized tensors
  spec.producer["tool"] = "oasr quantize";
  spec.producer["source"] = {{"format", models::to_string(source.format)},
                             {"checkpoint", source.weights_path.filename().string()}};

  models::ModelSource quantized = source;
  quantized.weights = std::make_shared<models::OrderedTensorSource>(
      quant::quantized_state_dict(*materialized.model, spec, *source.weights));
  quantized.quantization = nlohmann::json::parse(spec.to_json().dump());
  quantized.notes.push_back("quantized by oasr quantize --recipe " + options.recipe);
  models::NativeWriteOptions write_options;
  write_options.force = options.force;
  models::save_native_checkpoint(quantized, options.destination, write_options);

  std::cout << "wrote " << options.destination << " (oasr native format v2, " << scheme << ") from "
            << options.source << "\n"
            << "  recipe: " << options.recipe << "\n"
            << "  quantized layers: " << spec.layers.size() << "\n"
            << "  kept full precision: " << spec.skipped.size() << "\n";
  for (const quant::SkippedLayer& skipped : spec.skipped) {
    std::cout << "    " << skipped.path << ": " << skipped.reason << "\n";
  }
}

}  // namespace

Command add_quantize_command(CLI::App& parent) {
  auto options = std::make_shared<QuantizeOptions>();
  CLI::App* app = parent.add_subcommand(
      "quantize",
      "Quantize a full-precision checkpoint and write it as an oasr native checkpoint "
      "(format_version 2) that serves quantized with no flag");
  app->add_option("src", options->source,
                  "the full-precision checkpoint: a native directory, a WeNet directory or a .pt "
                  "inside one")
      ->required();
  app->add_option("dst", options->destination, "the native directory to write")->required();
  app->add_option("--recipe", options->recipe,
                  "int8_w8a8_rtn or fp8_w8a8_rtn: round-to-nearest weights, per-token "
                  "activations (the smoothquant_* recipes arrive with calibration)")
      ->required();
  app->add_option("--ignore", options->ignore,
                  "module-path globs to keep full precision (repeatable, or comma separated)");
  app->add_option("--module-types", options->module_types,
                  "layer kinds to quantize (default linear,pointwise_conv)");
  app->add_flag("--force", options->force,
                "replace DST when it is an existing oasr checkpoint directory");
  return {app, [options] { run_quantize(*options); }};
}

}  // namespace oasr::cli
