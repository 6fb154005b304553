// Flags shared by the subcommands that run the engine (transcribe, eval):
// one place fills EngineConfig from the command line, so every command reads
// the same flags the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/asr_engine.h"
#include "engine/engine_options.h"
#include "models/architecture.h"

namespace oasr::cli {

// --quantization SCHEME and repeatable --quantization-option key=value
// (ignore=GLOB[,GLOB...], module_types=KIND[,KIND...], kv_cache=fp8_e4m3).
struct QuantizationFlags {
  std::string scheme;
  std::vector<std::string> options;

  quant::QuantizationConfig to_config() const;  // validated
};
void add_quantization_flags(CLI::App& app, QuantizationFlags& flags);

// The engine flags as text, handed to the shared options layer
// (engine/engine_options.h) as key=value pairs: a flag overrides only when
// given (asked of its CLI option, never read from a sentinel), and every
// value typed is parsed and range-checked there, with the messages the
// server and the Python package give.
struct EngineFlags {
  struct Flag {
    std::string key;  // the options layer's key (beam_size)
    std::string value;
    const CLI::Option* option = nullptr;
  };
  std::deque<Flag> flags;  // a deque: CLI11 holds each value's address
  QuantizationFlags quantization;

  engine::OptionList given() const;  // the flags given, in registration order
  engine::EngineConfig to_config() const;
};

// Registers --ckpt-dir, --device, --dtype, --max-batch-size, --threads, one
// flag per decode key any registered architecture declares (--decode-method,
// alias --decoding-method, --beam-size, ...; asr/decode_options.h), and
// --quantization, --quantization-option.
void add_engine_flags(CLI::App& app, EngineFlags& flags);

// A decode flag's help: each declaring architecture's help, choices and default.
std::string decode_flag_help(const models::DeclaredDecodeOption& option);

}  // namespace oasr::cli
