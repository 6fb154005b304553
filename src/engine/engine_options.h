// One options layer for every front end: EngineConfig, DecodeOverrides and
// QuantizationConfig from key=value pairs (the CLI's flags, a server's
// query or form fields) or from a JSON object (the Python package, a config
// file), with the same names, the same validation and the same messages
// everywhere.
//
// Keys are the CLI's long flags without the dashes, '-' written '_':
//   ckpt_dir, device, dtype, max_batch_size, threads,
//   the decode keys every registered architecture declares
//   (models::declared_decode_options(): decode_method, beam_size, ...;
//   asr/decode_options.h), parsed as their declaration's kind,
//   quantization (a scheme), quantization_option (repeatable key=value:
//   ignore=GLOB[,GLOB...], module_types=KIND[,KIND...], kv_cache=fp8_e4m3).
// A key may be given once, quantization_option any number of times. In JSON,
// values are strings or numbers (a bool key also a boolean, a list key also
// a list of numbers), quantization may also be the object
// quant::QuantizationConfig::from_json reads, and quantization_option a list.
// Which decode keys apply is the loaded architecture's to say: ASREngine
// refuses a key it does not declare (models::check_decode_values).
// An unknown key, a repeated one, or a value of the wrong type is refused
// naming the key, its flag and what it takes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "asr/engine_config.h"

namespace oasr::engine {

// key=value pairs in the order given.
using OptionList = std::vector<std::pair<std::string, std::string>>;

// Every engine key; the config's fields that no key names keep their defaults.
EngineConfig engine_config_from_options(const OptionList& options);
EngineConfig engine_config_from_json(const nlohmann::json& object);

// The decode keys only: what one request may set over an engine's defaults.
// Any other known key is refused as fixed when the engine is built.
DecodeOverrides decode_overrides_from_options(const OptionList& options);
DecodeOverrides decode_overrides_from_json(const nlohmann::json& object);

// "key=value" -> {key, value}; refuses a piece without '=' or with an empty key.
std::pair<std::string, std::string> split_option(const std::string& text);

// The keys, in the order of the comment above (aliases left out).
std::vector<std::string> engine_option_keys();
// The decode keys only (every registered architecture's, once each).
std::vector<std::string> decode_option_keys();

}  // namespace oasr::engine
