#include "engine/quantize_recipe.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "audio/audio_file.h"
#include "core/cancellation.h"
#include "core/error.h"
#include "core/progress.h"
#include "engine/asr_engine.h"
#include "engine/engine_options.h"
#include "layers/quantizable.h"
#include "models/architecture.h"
#include "models/native_dir.h"
#include "quantize/apply.h"
#include "quantize/calibrated.h"
#include "quantize/export.h"
#include "quantize/smoothquant.h"

namespace oasr::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr int64_t kDefaultCalibUtterances = 128;
constexpr double kDefaultAlpha = 0.5;
constexpr const char* kReportName = "quantization_report.json";

struct RecipeOptions {
  std::string static_observer = "mse";
  std::string conv_observer = "mse";
};

RecipeOptions parse_options(const std::vector<std::string>& options) {
  RecipeOptions out;
  for (const std::string& option : options) {
    const size_t eq = option.find('=');
    OASR_CHECK(eq != std::string::npos && eq > 0, kInvalidArgument, "--option '", option,
               "' is not key=value; known keys: static_inputs.observer, "
               "static_conv_inputs.observer");
    const std::string key = option.substr(0, eq);
    const std::string value = option.substr(eq + 1);
    if (key == "static_inputs.observer") {
      quant::check_static_observer(value);
      out.static_observer = value;
    } else if (key == "static_conv_inputs.observer") {
      quant::check_static_observer(value);
      out.conv_observer = value;
    } else {
      OASR_THROW(kInvalidArgument, "--option: unknown key '", key,
                 "'; known keys: static_inputs.observer, static_conv_inputs.observer");
    }
  }
  return out;
}

std::optional<std::vector<quant::LayerKind>> parse_kinds(const std::string& module_types) {
  if (module_types.empty()) return std::nullopt;
  return quant::parse_layer_kinds(module_types);
}

bool selects_convolution(const std::string& module_types) {
  const auto kinds = parse_kinds(module_types);
  return kinds && std::any_of(kinds->begin(), kinds->end(), quant::is_convolution);
}

std::string sha256_of_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot be read");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  OASR_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1,
             kInternal, "sha256 of ", path.string(), " failed");
  std::string hex;
  char buffer[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(buffer, sizeof(buffer), "%02x", digest[i]);
    hex += buffer;
  }
  return hex;
}

void check_destination(const QuantizeRequest& request) {
  std::error_code error;
  if (!fs::exists(request.destination, error)) return;
  OASR_CHECK(request.force, kInvalidArgument, request.destination.string(),
             ": exists; pass --force to replace it (only an oasr checkpoint directory is ever "
             "replaced)");
  const bool empty_dir =
      fs::is_directory(request.destination, error) &&
      fs::directory_iterator(request.destination, error) == fs::directory_iterator();
  OASR_CHECK(empty_dir || models::looks_like_native_dir(request.destination), kInvalidArgument,
             request.destination.string(), ": is not an oasr checkpoint directory (no ",
             models::kNativeConfigName,
             "), so it is not replaced even with --force; choose another destination");
}

// The scheme a static consumer takes: its family's *_static preset.
const quant::QuantScheme& static_scheme_of(const std::string& scheme) {
  return quant::scheme_preset(quant::scheme_family(scheme) + "_static");
}

void use_scheme(quant::QuantizationSpec& spec, quant::LayerQuantization& layer,
                const quant::QuantScheme& scheme) {
  if (std::none_of(spec.schemes.begin(), spec.schemes.end(),
                   [&](const quant::QuantScheme& s) { return s.name == scheme.name; })) {
    spec.schemes.push_back(scheme);
  }
  layer.scheme = scheme.name;
}

// Drops schemes no layer uses any more (a static variant took their place).
void prune_schemes(quant::QuantizationSpec& spec) {
  std::vector<quant::QuantScheme> used;
  for (const quant::QuantScheme& scheme : spec.schemes) {
    if (std::any_of(spec.layers.begin(), spec.layers.end(),
                    [&](const quant::LayerQuantization& l) { return l.scheme == scheme.name; })) {
      used.push_back(scheme);
    }
  }
  spec.schemes = std::move(used);
}

struct CalibrationRun {
  const QuantizeRequest& request;
  const CalibrationSelection& selection;
  DecodeOverrides decode;  // the architecture's calibration decode
};

// Decodes each selected utterance alone with an engine on the source
// checkpoint serving `weights`, every quantizable layer handing its input
// to `recorder`.
void run_calibration_pass(const CalibrationRun& run, std::shared_ptr<const TensorSource> weights,
                          quant::CalibrationRecorder& recorder, const std::string& label) {
  EngineConfig config;
  config.ckpt_dir = run.request.source;
  config.weights = std::move(weights);
  config.device = run.request.calib_device;
  config.dtype = run.request.calib_dtype;
  config.max_batch_size = 1;
  config.decode = run.decode;
  ASREngine engine(config);
  engine.set_input_observer(&recorder);
  audio::AudioLoadOptions load;
  load.target_sample_rate = engine.sample_rate();
  load.require_sample_rate = true;
  const auto total = static_cast<int64_t>(run.selection.entries.size());
  std::optional<ProgressBar> progress;
  if (run.request.progress) {
    progress.emplace(total, label);
  } else {
    progress.emplace(total, label, stderr, false);
  }
  for (const io::ManifestEntry& entry : run.selection.entries) {
    throw_if_cancelled();
    // Every failure names the utterance: its id, the manifest and line, and
    // the audio file (a load error's own message starts with it).
    const std::string where = "calibration utterance '" + entry.id + "' (" +
                              run.request.calib_manifest.string() + " line " +
                              std::to_string(entry.line) + "): ";
    audio::DecodedAudio decoded;
    try {
      decoded = audio::load_audio(entry.audio, load);
    } catch (const Error& e) {
      const std::string hint =
          e.code() == ErrorCode::kInvalidArgument
              ? " -- calibration audio must be at the model's sample rate (" +
                    std::to_string(engine.sample_rate()) +
                    " Hz) and is not resampled; convert the manifest's audio first "
                    "(tools/data/resample_manifest.py MANIFEST OUT_DIR --rate " +
                    std::to_string(engine.sample_rate()) + " writes a converted copy)"
              : std::string();
      throw Error(e.code(), where + e.what() + hint);
    }
    // transcribe_each starts a failure's message with the file's path (and
    // rethrows a stop request itself).
    const std::vector<UtteranceResult> result =
        engine.transcribe_each({decoded.samples}, {entry.audio.string()});
    if (result.front().error) {
      const Error& e = *result.front().error;
      throw Error(e.code(), where + e.what());
    }
    progress->advance();
  }
  progress->finish();
  engine.set_input_observer(nullptr);
}

ordered_json range_of(const std::vector<float>& values) {
  if (values.empty()) return nullptr;
  return {{"min", *std::min_element(values.begin(), values.end())},
          {"max", *std::max_element(values.begin(), values.end())}};
}

ordered_json layer_report(const std::map<std::string, Module*>& modules,
                          const quant::LayerQuantization& entry,
                          const quant::QuantizationSpec& spec,
                          const quant::CalibrationRecorder* recorder,
                          const quant::CalibratedTensors& tensors) {
  const Module* module = modules.at(entry.path);
  ordered_json out;
  out["path"] = entry.path;
  out["kind"] = std::string(quant::to_string(entry.kind));
  out["scheme"] = entry.scheme;
  const Tensor scale = module->param("weight_scale").to(Device::cpu()).contiguous();
  out["weight_scale"] =
      range_of(std::vector<float>(scale.data<float>(), scale.data<float>() + scale.numel()));
  ordered_json input;
  const quant::QuantScheme& scheme = spec.scheme(entry.scheme);
  if (quant::scheme_has_static_input(scheme)) {
    const quant::StaticInputScale& s = tensors.static_inputs.at(entry.path);
    input["type"] = "static";
    input["input_scale"] = s.input_scale;
    input["observer"] = s.observer;
    input["clip"] = s.clip;
    input["calibration_max"] = s.observed_max;
    input["clip_ratio"] = s.observed_max > 0.0f ? s.clip / s.observed_max : 1.0f;
  } else {
    input["type"] = "per_token";
  }
  if (entry.runtime_smoothed) input["smooth_inv"] = range_of(tensors.smooth_inv.at(entry.path));
  out["input"] = std::move(input);
  if (recorder != nullptr) {
    if (const quant::LayerObservation* observation = recorder->find(entry.path)) {
      out["calibration_input_absmax"] = range_of(observation->channels.values());
      out["calibration_rows"] = observation->channels.rows();
    }
  }
  return out;
}

}  // namespace

const std::vector<QuantizeRecipe>& quantize_recipes() {
  static const std::vector<QuantizeRecipe> recipes = {
      {"int8_w8a8_rtn", "int8_w8a8", false, false},
      {"fp8_w8a8_rtn", "fp8_w8a8", false, false},
      {"smoothquant_w8a8", "int8_w8a8", true, false},
      {"smoothquant_fp8_w8a8", "fp8_w8a8", true, false},
      {"smoothquant_w8a8_fused", "int8_w8a8", true, true},
      {"smoothquant_fp8_w8a8_fused", "fp8_w8a8", true, true},
  };
  return recipes;
}

const QuantizeRecipe& quantize_recipe(const std::string& name) {
  std::string known;
  for (const QuantizeRecipe& recipe : quantize_recipes()) {
    if (recipe.name == name) return recipe;
    known += (known.empty() ? "" : ", ") + recipe.name;
  }
  OASR_THROW(kInvalidArgument, "unknown --recipe '", name, "'; known recipes: ", known);
}

void QuantizeRequest::validate() const {
  const QuantizeRecipe& chosen = quantize_recipe(recipe);
  parse_options(options);
  if (!module_types.empty()) quant::parse_layer_kinds(module_types);
  const bool conv = selects_convolution(module_types);
  OASR_CHECK(!(conv && quant::scheme_family(chosen.scheme) == "fp8_w8a8"), kUnsupported,
             "--module-types ", module_types, " with --recipe ", recipe,
             ": convolutions are int8 only; drop the convolution kinds or use an int8 recipe");
  const bool calibrates = chosen.smoothquant || chosen.static_chain_inputs || conv;
  if (calibrates) {
    OASR_CHECK(!calib_manifest.empty(), kInvalidArgument, "--recipe ", recipe,
               conv && !chosen.smoothquant ? " with a convolution kind in --module-types" : "",
               " needs calibration audio: pass --calib-manifest (a jsonl of {id, audio, ...} at "
               "the model's sample rate)");
  } else {
    OASR_CHECK(calib_manifest.empty() && audio_root.empty() && !calib_utterances &&
                   calib_dtype == "float32" && calib_device == "cpu",
               kInvalidArgument, "--recipe ", recipe,
               " quantizes without calibration; drop --calib-manifest / --audio-root / "
               "--calib-utterances / --calib-dtype / --calib-device (or choose a calibrated "
               "recipe: smoothquant_*)");
  }
  OASR_CHECK(!alpha || chosen.smoothquant, kInvalidArgument, "--alpha is SmoothQuant's; --recipe ",
             recipe, " does not smooth (use a smoothquant_* recipe or drop --alpha)");
  OASR_CHECK(!alpha || (*alpha >= 0.0 && *alpha <= 1.0), kInvalidArgument,
             "--alpha must be in [0, 1], got ", *alpha);
  OASR_CHECK(!calib_utterances || *calib_utterances >= 1, kInvalidArgument,
             "--calib-utterances must be at least 1, got ", *calib_utterances);
  OASR_CHECK(calib_dtype == "float32" || calib_dtype == "bfloat16", kInvalidArgument,
             "--calib-dtype must be float32 or bfloat16, got '", calib_dtype, "'");
  OASR_CHECK(calib_dtype == "float32" || calib_device != "cpu", kUnsupported,
             "--calib-dtype bfloat16 calibrates a bfloat16 copy on a GPU (the CPU computes in "
             "float32 only); add --calib-device cuda, or calibrate in float32");
  const bool static_observer_set = std::any_of(options.begin(), options.end(), [](const auto& o) {
    return o.rfind("static_inputs.", 0) == 0;
  });
  OASR_CHECK(!static_observer_set || chosen.static_chain_inputs, kInvalidArgument,
             "--option static_inputs.*: --recipe ", recipe,
             " measures no static GEMM input scale (only the *_fused recipes do)");
  const bool conv_observer_set = std::any_of(options.begin(), options.end(), [](const auto& o) {
    return o.rfind("static_conv_inputs.", 0) == 0;
  });
  OASR_CHECK(!conv_observer_set || conv, kInvalidArgument,
             "--option static_conv_inputs.*: no convolution kind is selected (--module-types)");
}

CalibrationSelection select_calibration_utterances(const fs::path& manifest,
                                                   const fs::path& audio_root, int64_t count) {
  io::ManifestOptions options;
  options.audio_root = audio_root;
  options.require_text = false;
  std::vector<io::ManifestEntry> entries = io::read_manifest(manifest, options);
  OASR_CHECK(!entries.empty(), kInvalidArgument, manifest.string(),
             ": the calibration manifest lists no utterance");
  std::sort(entries.begin(), entries.end(),
            [](const io::ManifestEntry& a, const io::ManifestEntry& b) { return a.id < b.id; });
  CalibrationSelection out;
  out.manifest_utterances = static_cast<int64_t>(entries.size());
  const int64_t total = out.manifest_utterances;
  const int64_t take = std::min(count, total);
  for (int64_t i = 0; i < take; ++i) {
    out.entries.push_back(entries[static_cast<size_t>(i * total / take)]);
  }
  out.rule = "sorted by id, evenly strided (entry floor(i * " + std::to_string(total) + " / " +
             std::to_string(take) + ")): " + std::to_string(take) + " of " + std::to_string(total);
  out.manifest_sha256 = sha256_of_file(manifest);
  return out;
}

QuantizeOutcome quantize_checkpoint(const QuantizeRequest& request) {
  // Everything that can be refused without reading weights is refused first.
  request.validate();
  const QuantizeRecipe& recipe = quantize_recipe(request.recipe);
  const RecipeOptions options = parse_options(request.options);
  check_destination(request);
  const double alpha = request.alpha.value_or(kDefaultAlpha);

  quant::QuantizationRequest asked;
  asked.scheme = recipe.scheme;
  for (const std::string& glob : request.ignore) {
    for (std::string& part : quant::split_comma_list(glob)) asked.ignore.push_back(std::move(part));
  }
  asked.module_types = parse_kinds(request.module_types);
  const quant::QuantizationConfig config = quant::QuantizationConfig::parse(std::move(asked));

  const models::Architecture& architecture = models::architecture_for(request.source);
  OASR_CHECK(architecture.open_for_quantization != nullptr, kUnsupported,
             "oasr quantize: ", request.source.string(), " is a ", architecture.display_name,
             " model, and oasr quantize writes no ", architecture.display_name,
             " checkpoint yet; serve it with online --quantization int8_w8a8 or fp8_w8a8 instead");
  const std::unique_ptr<models::QuantizableCheckpoint> checkpoint =
      architecture.open_for_quantization(request.source);
  Module& model = checkpoint->master();
  const quant::QuantLayout& layout = checkpoint->layout();

  quant::SpecOptions spec_options;
  spec_options.online = false;
  spec_options.recipe = request.recipe;
  quant::QuantizationSpec spec = quant::spec_from_config(config, model, layout, spec_options);
  OASR_CHECK(!spec.layers.empty(), kInvalidArgument, "--recipe ", request.recipe,
             " selects no layer of ", request.source.string(),
             " (every candidate was ignored or skipped); check --ignore / --module-types");
  OASR_CHECK(!recipe.smoothquant || layout.declares_smoothing(), kUnsupported, "--recipe ",
             request.recipe, ": the ", layout.architecture,
             " declares no smoothing layout; use int8_w8a8_rtn / fp8_w8a8_rtn");

  std::set<std::string> quantized;
  for (const quant::LayerQuantization& entry : spec.layers) quantized.insert(entry.path);
  // Runtime smoothers and static chain consumers, as the layout declares them.
  std::vector<std::string> algorithms;
  if (recipe.smoothquant) {
    algorithms.push_back("smoothquant");
    for (quant::LayerQuantization& entry : spec.layers) {
      const quant::SmoothGroup* group = layout.group_of(entry.path);
      entry.runtime_smoothed = group != nullptr && group->fold == quant::SmoothFold::kRuntime;
    }
  }
  if (recipe.static_chain_inputs) {
    algorithms.push_back("static_inputs");
    for (quant::LayerQuantization& entry : spec.layers) {
      const quant::GemmChain* chain = layout.chain_into(entry.path);
      if (chain == nullptr || quantized.count(chain->producer) == 0) continue;
      use_scheme(spec, entry, static_scheme_of(entry.scheme));
    }
  }
  std::vector<std::string> conv_layers;
  std::vector<std::string> static_gemm_layers;
  for (const quant::LayerQuantization& entry : spec.layers) {
    if (!quant::scheme_has_static_input(spec.scheme(entry.scheme))) continue;
    (quant::is_convolution(entry.kind) ? conv_layers : static_gemm_layers).push_back(entry.path);
  }
  if (!conv_layers.empty()) algorithms.push_back("static_conv_inputs");
  algorithms.push_back("rtn");
  prune_schemes(spec);
  for (const std::string& name : algorithms) quant::quant_algorithm(name);  // registered

  quant::CalibratedTensors tensors;
  quant::SmoothQuantResult smoothing;
  quant::CalibrationRecorder pass1;
  quant::CalibrationRecorder pass2;
  const quant::CalibrationRecorder* stats = nullptr;
  CalibrationSelection selection;
  const bool calibrates = recipe.smoothquant || !static_gemm_layers.empty() || !conv_layers.empty();
  const bool second_pass = recipe.smoothquant && !static_gemm_layers.empty();
  if (calibrates) {
    selection =
        select_calibration_utterances(request.calib_manifest, request.audio_root,
                                      request.calib_utterances.value_or(kDefaultCalibUtterances));
    const CalibrationRun run{request, selection,
                             decode_overrides_from_options(checkpoint->calibration_decode())};
    // Convolution inputs precede every fold; without smoothing the GEMM
    // chains' inputs are final after pass 1 too.
    for (const std::string& path : conv_layers) pass1.track_histogram(path);
    if (!second_pass) {
      for (const std::string& path : static_gemm_layers) pass1.track_histogram(path);
    }
    run_calibration_pass(run, checkpoint->weights(), pass1,
                         second_pass ? "calibrate 1/2" : "calibrate");
    stats = &pass1;
    if (recipe.smoothquant) {
      smoothing = quant::apply_smoothquant(model, layout, pass1, alpha, quantized);
      tensors.smooth_inv = smoothing.smooth_inv;
      tensors.runtime_scale = smoothing.runtime_scale;
    }
    for (const std::string& path : conv_layers) {
      const quant::QuantScheme& scheme = spec.scheme(spec.find_layer(path)->scheme);
      tensors.static_inputs[path] =
          quant::choose_static_input_scale(pass1, path, options.conv_observer, scheme.input->dtype);
    }
    const quant::CalibrationRecorder* static_stats = &pass1;
    if (second_pass) {
      // Pass 2 decodes with the smoothed master, each static consumer's
      // histogram taken after its runtime smoother: the input it will see.
      std::vector<std::pair<std::string, Tensor>> weights;
      for (auto& [name, slot] : model.named_parameters()) {
        if (slot->value.defined()) weights.emplace_back(name, slot->value);
      }
      auto smoothed = std::make_shared<OrderedTensorSource>(std::move(weights));
      for (const std::string& path : static_gemm_layers) {
        const auto inverse = tensors.smooth_inv.find(path);
        pass2.track_histogram(
            path, inverse == tensors.smooth_inv.end() ? std::vector<float>{} : inverse->second);
      }
      run_calibration_pass(run, smoothed, pass2, "calibrate 2/2");
      static_stats = &pass2;
    }
    for (const std::string& path : static_gemm_layers) {
      const quant::QuantScheme& scheme = spec.scheme(spec.find_layer(path)->scheme);
      tensors.static_inputs[path] = quant::choose_static_input_scale(
          *static_stats, path, options.static_observer, scheme.input->dtype);
    }
  }
  quant::quantize_model_calibrated(model, spec, tensors);

  // Provenance (the spec's producer) and the report.
  spec.online = false;
  spec.producer["tool"] = "oasr quantize";
  spec.producer["recipe"] = request.recipe;
  spec.producer["algorithms"] = algorithms;
  spec.producer["source"] = checkpoint->provenance();
  if (calibrates) {
    spec.producer["calibration"] = {{"manifest", request.calib_manifest.filename().string()},
                                    {"manifest_sha256", selection.manifest_sha256},
                                    {"selection", selection.rule},
                                    {"utterances", selection.entries.size()},
                                    {"dtype", request.calib_dtype},
                                    {"device", request.calib_device},
                                    {"decode", checkpoint->calibration_decode_description()}};
  }
  if (recipe.smoothquant) spec.producer["alpha"] = alpha;
  if (!static_gemm_layers.empty())
    spec.producer["static_inputs.observer"] = options.static_observer;
  if (!conv_layers.empty()) spec.producer["static_conv_inputs.observer"] = options.conv_observer;

  ordered_json report;
  report["format_version"] = 1;
  report["recipe"] = request.recipe;
  report["source"] = request.source.string();
  report["schemes"] = spec.scheme_names();
  report["algorithms"] = algorithms;
  report["producer"] = spec.to_json()["producer"];
  if (recipe.smoothquant) report["smoothquant"] = {{"alpha", alpha}, {"groups", smoothing.report}};
  ordered_json layers = ordered_json::array();
  const auto modules = quant::modules_by_path(model);
  for (const quant::LayerQuantization& entry : spec.layers) {
    layers.push_back(layer_report(modules, entry, spec, stats, tensors));
  }
  report["layers"] = std::move(layers);
  ordered_json skipped = ordered_json::array();
  for (const quant::SkippedLayer& s : spec.skipped) {
    skipped.push_back({{"path", s.path}, {"reason", s.reason}});
  }
  report["skipped"] = std::move(skipped);

  checkpoint->write_quantized(std::make_shared<OrderedTensorSource>(quant::quantized_state_dict(
                                  model, spec, *checkpoint->weights(), smoothing.rewritten)),
                              nlohmann::json::parse(spec.to_json().dump()),
                              "quantized by oasr quantize --recipe " + request.recipe,
                              request.destination, request.force,
                              {{kReportName, report.dump(2) + "\n"}});

  QuantizeOutcome outcome;
  outcome.spec = std::move(spec);
  outcome.report = std::move(report);
  outcome.calibration_utterances = static_cast<int64_t>(selection.entries.size());
  return outcome;
}

}  // namespace oasr::engine
