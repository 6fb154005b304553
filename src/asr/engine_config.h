// What a front end (the CLI, the server, the Python package) fills to build
// an ASREngine: the checkpoint, the device and dtype, batching, decode
// overrides and quantization. engine/engine_options.h parses it from
// key=value pairs or JSON, so every front end takes the same names and gives
// the same messages.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "asr/decode_options.h"
#include "asr/materialize_options.h"
#include "core/device.h"
#include "core/dtype.h"
#include "layers/module.h"
#include "quant/spec.h"

namespace oasr::engine {

struct EngineConfig {
  std::filesystem::path ckpt_dir;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  // The served dtype: "float32", "float16" or "bfloat16"; empty takes the
  // device's default (float32 on the CPU, float16 on CUDA). The CPU serves
  // float32 only.
  std::string dtype;
  int64_t max_batch_size = 8;
  // CPU threads for every op (oasr's worker pool and OpenBLAS together,
  // ops/cpu_threads.h); 0 keeps the process's setting (default: the
  // machine's hardware threads). Process-wide: the last engine built wins.
  int threads = 0;
  DecodeOverrides decode;  // the engine's defaults; a request may override them
  // Online quantization of a full-precision checkpoint ("int8_w8a8", or
  // {scheme, ignore, module_types, kv_cache}); a quantized checkpoint is
  // served quantized without it (its spec is authoritative).
  quant::QuantizationConfig quantization;
  // Set: serve these tensors (the checkpoint's state-dict names) in place of
  // ckpt_dir's weights file; config, vocabulary and the rest still come from
  // ckpt_dir. oasr quantize's calibration decodes its smoothed master so.
  std::shared_ptr<const TensorSource> weights;

  // Refuses (kUnsupported, saying what to do): cuda in a build without CUDA
  // or on a machine without a GPU, a 16-bit dtype on the CPU. With
  // `on_this_machine` false it skips what only the machine that builds the
  // engine can answer (is the CUDA device there), for a configuration
  // checked on one machine and served on another (oasr.ray's driver and its
  // GPU replicas).
  void validate(bool on_this_machine = true) const;
  std::string dump() const;
  Device served_device() const;  // parsed device
  DType served_dtype() const;    // dtype, or the device's default when empty
  // What every architecture's materialize() is given for this config.
  MaterializeOptions materialize_options() const;
};

}  // namespace oasr::engine
