// The limits an operator gives the transcription service (oasr-server's
// flags, oasr.ray's service config), and the ServiceOptions a loaded engine
// turns them into: one place for the ranges, the defaults and the model's
// own audio limit, so every front end of server::TranscriptionService
// answers the same requests the same way.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "engine/asr_engine.h"
#include "server/service.h"

namespace oasr::server {

struct ServiceLimits {
  std::string model_name;  // "" : the checkpoint folder's name
  double max_upload_mb = 25.0;
  double max_audio_seconds = 600.0;
  int64_t request_timeout_s = 120;
  int64_t max_batch_delay_ms = 10;
  int64_t max_queue = 256;
  int64_t stream_threads = 2;
  std::string api_key;  // "" : no authentication
};

// One limit's name (the flag without its dashes, the config key), range,
// help and field; oasr-server's flags and the JSON reader both take them
// from here. Exactly one of `real` / `integer` is set.
struct LimitSpec {
  const char* key;
  double min;
  double max;
  const char* help;
  double ServiceLimits::*real;
  int64_t ServiceLimits::*integer;
};
// The numeric limits in ServiceLimits' order after model_name.
const LimitSpec* limit_specs(size_t* count);
// A limit as people write it: 1000000, not 1e+06; 0.001, not 1e-03.
std::string limit_text(double value);

// A JSON object of ServiceLimits keys (model_name, max_upload_mb, ...,
// api_key). Unknown keys, wrong types, values out of range and an empty
// api_key are refused (oasr::Error naming the key and its range).
ServiceLimits service_limits_from_json(const nlohmann::json& object);

// The options the service runs with for `engine`: the audio limit lowered to
// what the model takes at once (logged, and named in the 422 reply), the
// batch size the engine was built for.
ServiceOptions service_options(const engine::ASREngine& engine, const ServiceLimits& limits);

}  // namespace oasr::server
