// `oasr quantize`: a full-precision checkpoint in, a native format_version 2
// checkpoint out, by recipe (spec "Using it"):
//
//   recipe                      scheme     algorithms
//   int8_w8a8_rtn               int8_w8a8  rtn
//   fp8_w8a8_rtn                fp8_w8a8   rtn
//   smoothquant_w8a8            int8_w8a8  smoothquant, rtn
//   smoothquant_fp8_w8a8        fp8_w8a8   smoothquant, rtn
//   smoothquant_w8a8_fused      int8_w8a8  smoothquant, static_inputs, rtn
//   smoothquant_fp8_w8a8_fused  fp8_w8a8   smoothquant, static_inputs, rtn
//   (+ static_conv_inputs whenever --module-types selects a convolution)
//
// Calibration decodes a sorted, evenly strided selection of the manifest one
// unpadded utterance at a time through the checkpoint's own frontend, with
// the decode its architecture names (models/architecture.h,
// QuantizableCheckpoint::calibration_decode; U2++: attention rescoring), so
// the encoder and the decoder both see the inputs they see when decoding. Pass 1 records every
// quantizable layer's per-channel input maxima (and the convolutions' histograms); SmoothQuant
// folds its scales into the fp32 master; pass 2 (fused recipes) decodes
// again with the smoothed model and records each static consumer's input
// after its runtime smoother. The checkpoint and quantization_report.json
// are staged and renamed into place at the end, so an error or an interrupt
// leaves nothing half-written.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/manifest.h"
#include "quant/spec.h"

namespace oasr::engine {

struct QuantizeRecipe {
  std::string name;
  std::string scheme;  // int8_w8a8 / fp8_w8a8
  bool smoothquant = false;
  bool static_chain_inputs = false;  // the *_fused recipes
};
const std::vector<QuantizeRecipe>& quantize_recipes();
const QuantizeRecipe& quantize_recipe(const std::string& name);  // kInvalidArgument listing them

struct QuantizeRequest {
  std::filesystem::path source;
  std::filesystem::path destination;
  std::string recipe;
  std::vector<std::string> ignore;  // globs (each may be a comma list)
  std::string module_types;         // empty: linear,pointwise_conv
  std::filesystem::path calib_manifest;
  std::filesystem::path audio_root;         // empty: the manifest's folder
  std::optional<int64_t> calib_utterances;  // default 128
  std::optional<double> alpha;              // default 0.5 (smoothquant recipes only)
  std::string calib_dtype = "float32";      // float32, or bfloat16 (on a CUDA calib device)
  std::string calib_device = "cpu";
  // key=value: static_inputs.observer=mse|minmax, static_conv_inputs.observer=mse|minmax.
  std::vector<std::string> options;
  bool force = false;
  bool progress = true;  // a progress bar on a terminal

  // Every refusal that needs no weights: unknown recipe / option / observer,
  // calibration flags a recipe does not use, a calibrated recipe without
  // --calib-manifest, alpha outside [0, 1], fewer than one utterance,
  // bfloat16 calibration on the CPU.
  void validate() const;
};

struct CalibrationSelection {
  std::vector<io::ManifestEntry> entries;  // the chosen utterances, in selection order
  int64_t manifest_utterances = 0;
  std::string rule;             // "sorted by id, evenly strided: 64 of 64"
  std::string manifest_sha256;  // of the manifest file's bytes
};
// Sorts the manifest's entries by id and takes `count` evenly strided ones
// (entry floor(i * total / count)); all of them when the manifest is smaller.
CalibrationSelection select_calibration_utterances(const std::filesystem::path& manifest,
                                                   const std::filesystem::path& audio_root,
                                                   int64_t count);

struct QuantizeOutcome {
  quant::QuantizationSpec spec;
  nlohmann::ordered_json report;  // what quantization_report.json holds
  int64_t calibration_utterances = 0;
};
QuantizeOutcome quantize_checkpoint(const QuantizeRequest& request);

}  // namespace oasr::engine
