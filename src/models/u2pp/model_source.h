// ModelSource: everything a model needs from a checkpoint directory,
// whatever its format (a native oasr directory or a WeNet experiment
// directory), so model code has one entry point: load_checkpoint_dir()
// (native_checkpoint.h).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/module.h"
#include "models/u2pp/wenet_config.h"

namespace oasr::models {

// The state-dict names of WeNet's GlobalCMVN buffers, which WeNet's own
// checkpoints already hold; the native format keeps them.
inline constexpr const char* kCmvnMeanName = "encoder.global_cmvn.mean";
inline constexpr const char* kCmvnIstdName = "encoder.global_cmvn.istd";

enum class CheckpointFormat { kNative, kWenet };
const char* to_string(CheckpointFormat format);  // "native", "wenet"

// Global CMVN as WeNet applies it: (x - mean) * istd, float32 [input_dim].
struct Cmvn {
  Tensor mean;
  Tensor istd;
  bool defined() const { return mean.defined(); }
};

struct ModelSource {
  CheckpointFormat format = CheckpointFormat::kNative;
  std::filesystem::path dir;           // the checkpoint directory
  std::filesystem::path weights_path;  // final.pt / avg_N.pt / model.safetensors
  int format_version = 1;              // native: oasr_config.json's format_version
  // The quantization spec of a quantized checkpoint (format_version 2;
  // quant::QuantizationSpec::from_json reads it); null for full precision.
  // Writing a source with one makes a format_version 2 directory.
  nlohmann::json quantization;
  WenetConfig config;
  // Every tensor under WeNet's state-dict names, CMVN buffers included.
  std::shared_ptr<const TensorSource> weights;
  std::vector<std::string> units;   // token of each id, 0 .. vocab_size - 1
  Cmvn cmvn;                        // undefined when the model applies none
  std::filesystem::path bpe_model;  // sentencepiece model when tokenizer is bpe
  // What reading changed, one line each ("x: float64 -> float32"), for reports.
  std::vector<std::string> notes;
};

}  // namespace oasr::models
