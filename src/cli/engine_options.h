// Flags shared by the subcommands that run the engine (transcribe, eval):
// one place fills EngineConfig from the command line, so every command reads
// the same flags the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "engine/asr_engine.h"

namespace oasr::cli {

// --quantization SCHEME and repeatable --quantization-option key=value
// (ignore=GLOB[,GLOB...], module_types=KIND[,KIND...], kv_cache=fp8_e4m3).
struct QuantizationFlags {
  std::string scheme;
  std::vector<std::string> options;

  quant::QuantizationConfig to_config() const;  // validated
};
void add_quantization_flags(CLI::App& app, QuantizationFlags& flags);

struct EngineFlags {
  std::string ckpt_dir;
  std::string device = "cpu";
  std::string dtype;  // empty: float32 on cpu, float16 on cuda
  int64_t max_batch_size = 8;
  int threads = 0;            // 0: the machine's hardware threads
  std::string decode_method;  // empty: the checkpoint's default
  // The decode flags below override the checkpoint's defaults only when
  // given: whether they were is asked of their options (add_engine_flags
  // sets these), never read from a sentinel value, so every value typed is
  // validated -- 0, -1, nan included.
  int64_t beam_size = 0;
  double ctc_weight = 0.0;
  double reverse_weight = 0.0;
  int64_t chunk_size = 0;
  int64_t left_chunks = 0;
  double length_penalty = 1.0;
  struct GivenOptions {
    const CLI::Option* beam_size = nullptr;
    const CLI::Option* ctc_weight = nullptr;
    const CLI::Option* reverse_weight = nullptr;
    const CLI::Option* chunk_size = nullptr;
    const CLI::Option* left_chunks = nullptr;
    const CLI::Option* length_penalty = nullptr;
  } options;
  QuantizationFlags quantization;

  engine::EngineConfig to_config() const;
};

// Registers --ckpt-dir, --device, --dtype, --max-batch-size, --decode-method (alias
// --decoding-method), --beam-size, --ctc-weight, --reverse-weight,
// --chunk-size, --left-chunks (U2++), --length-penalty (Whisper),
// --quantization, --quantization-option.
void add_engine_flags(CLI::App& app, EngineFlags& flags);

}  // namespace oasr::cli
