// `oasr quantize SRC DST --recipe R [--calib-manifest M] [--audio-root DIR]
// [--calib-utterances N] [--alpha A] [--calib-dtype D] [--calib-device DEV]
// [--option KEY=VALUE] [--ignore GLOB] [--module-types KINDS] [--force]`:
// a thin adapter over engine::quantize_checkpoint (engine/quantize_recipe.h),
// which calibrates, smooths, quantizes and writes a native format_version 2
// checkpoint with quantization_report.json beside its weights; it serves
// quantized with no flag.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/quantize_recipe.h"

namespace oasr::cli {

namespace {

void print_outcome(const engine::QuantizeRequest& request, const engine::QuantizeOutcome& outcome) {
  const quant::QuantizationSpec& spec = outcome.spec;
  std::string schemes;
  for (const std::string& name : spec.scheme_names())
    schemes += (schemes.empty() ? "" : ", ") + name;
  std::cout << "wrote " << request.destination.string() << " (oasr native format v2, " << schemes
            << ") from " << request.source.string() << "\n"
            << "  recipe: " << request.recipe << "\n";
  if (outcome.calibration_utterances > 0) {
    std::cout << "  calibration: " << outcome.calibration_utterances << " utterances of "
              << request.calib_manifest.string() << "\n";
  }
  int64_t runtime = 0;
  int64_t static_inputs = 0;
  for (const quant::LayerQuantization& layer : spec.layers) {
    runtime += layer.runtime_smoothed ? 1 : 0;
    static_inputs += quant::scheme_has_static_input(spec.scheme(layer.scheme)) ? 1 : 0;
  }
  std::cout << "  quantized layers: " << spec.layers.size() << " (" << runtime
            << " runtime-smoothed, " << static_inputs << " with a static input scale)\n"
            << "  report: " << (request.destination / "quantization_report.json").string() << "\n"
            << "  kept full precision: " << spec.skipped.size() << "\n";
  for (const quant::SkippedLayer& skipped : spec.skipped) {
    std::cout << "    " << skipped.path << ": " << skipped.reason << "\n";
  }
}

}  // namespace

Command add_quantize_command(CLI::App& parent) {
  auto request = std::make_shared<engine::QuantizeRequest>();
  auto calib_utterances = std::make_shared<int64_t>(0);
  auto alpha = std::make_shared<double>(0.0);
  CLI::App* app = parent.add_subcommand(
      "quantize",
      "Quantize a full-precision checkpoint (calibrating and smoothing as the recipe says) and "
      "write an oasr native checkpoint (format_version 2) that serves quantized with no flag");
  app->add_option("src", request->source,
                  "the full-precision checkpoint: a native directory, a WeNet directory or a .pt "
                  "inside one")
      ->required();
  app->add_option("dst", request->destination, "the native directory to write")->required();
  std::string recipes;
  for (const engine::QuantizeRecipe& r : engine::quantize_recipes()) {
    recipes += (recipes.empty() ? "" : ", ") + r.name;
  }
  app->add_option("--recipe", request->recipe,
                  "one of " + recipes +
                      " (*_rtn: no calibration; smoothquant_*: SmoothQuant, per-token inputs; "
                      "*_fused: plus a static input scale on each FFN w_2)")
      ->required();
  app->add_option("--calib-manifest", request->calib_manifest,
                  "calibration audio: a jsonl of {id, audio, ...} at the model's sample rate");
  app->add_option("--audio-root", request->audio_root,
                  "folder the manifest's relative audio paths start from (default: its folder)");
  CLI::Option* utterances_option =
      app->add_option("--calib-utterances", *calib_utterances,
                      "calibration utterances, sorted by id and evenly strided (default 128)");
  CLI::Option* alpha_option = app->add_option(
      "--alpha", *alpha, "SmoothQuant's migration strength in [0, 1] (default 0.5)");
  app->add_option("--calib-dtype", request->calib_dtype,
                  "float32 (default), or bfloat16: calibrate a bf16 copy on --calib-device cuda");
  app->add_option("--calib-device", request->calib_device,
                  "where calibration decodes: cpu (default) or cuda[:N]");
  app->add_option("--option", request->options,
                  "KEY=VALUE (repeatable): static_inputs.observer=mse|minmax, "
                  "static_conv_inputs.observer=mse|minmax");
  app->add_option("--ignore", request->ignore,
                  "module-path globs to keep full precision (repeatable, or comma separated)");
  app->add_option("--module-types", request->module_types,
                  "layer kinds to quantize (default linear,pointwise_conv; conv2d / conv1d need "
                  "--calib-manifest and are int8 only)");
  app->add_flag("--force", request->force,
                "replace DST when it is an existing oasr checkpoint directory");
  return {app, [request, calib_utterances, alpha, utterances_option, alpha_option] {
            if (utterances_option->count() > 0) request->calib_utterances = *calib_utterances;
            if (alpha_option->count() > 0) request->alpha = *alpha;
            const engine::QuantizeOutcome outcome = engine::quantize_checkpoint(*request);
            print_outcome(*request, outcome);
          }};
}

}  // namespace oasr::cli
