#include "server/service_options.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/logging.h"

namespace oasr::server {
namespace {

// oasr-server's flag ranges; NaN and infinities are refused with them.
constexpr LimitSpec kLimits[] = {
    {"max_upload_mb", 0.001, 4096.0, "largest request body in MB (default 25)",
     &ServiceLimits::max_upload_mb, nullptr},
    {"max_audio_seconds", 0.1, 7200.0, "longest audio accepted, 422 beyond (default 600)",
     &ServiceLimits::max_audio_seconds, nullptr},
    {"request_timeout_s", 1, 86400, "a request still queued after this gets 504 (default 120)",
     nullptr, &ServiceLimits::request_timeout_s},
    {"max_batch_delay_ms", 0, 10000,
     "how long the oldest queued utterance waits for company (default 10)", nullptr,
     &ServiceLimits::max_batch_delay_ms},
    {"max_queue", 1, 1000000, "utterances queued before 429 (default 256)", nullptr,
     &ServiceLimits::max_queue},
    {"stream_threads", 1, 256,
     "threads decoding WebSocket streams' chunks, apart from the HTTP io threads (default 2)",
     nullptr, &ServiceLimits::stream_threads},
};

std::string key_list() {
  std::string out = "model_name";
  for (const LimitSpec& spec : kLimits) out += std::string(", ") + spec.key;
  return out + ", api_key";
}

std::string text_value(const nlohmann::json& value, const std::string& key) {
  OASR_CHECK(value.is_string(), kInvalidArgument, "service option '", key,
             "' must be a string, not ", value.dump());
  return value.get<std::string>();
}

double number_value(const nlohmann::json& value, const LimitSpec& spec) {
  const std::string key = spec.key;
  const bool integer = spec.integer != nullptr;
  OASR_CHECK(value.is_number() && (!integer || value.is_number_integer()), kInvalidArgument,
             "service option '", key, "' must be ", integer ? "an integer" : "a number", " in [",
             limit_text(spec.min), ", ", limit_text(spec.max), "], not ", value.dump());
  const double number = value.get<double>();
  OASR_CHECK(std::isfinite(number) && number >= spec.min && number <= spec.max, kInvalidArgument,
             "service option '", key, "' is ", value.dump(), "; it must be in [",
             limit_text(spec.min), ", ", limit_text(spec.max), "] (", spec.help, ")");
  return number;
}

}  // namespace

std::string limit_text(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  std::ostringstream out;
  out << value;
  return out.str();
}

const LimitSpec* limit_specs(size_t* count) {
  *count = std::size(kLimits);
  return kLimits;
}

ServiceLimits service_limits_from_json(const nlohmann::json& object) {
  OASR_CHECK(object.is_object(), kInvalidArgument, "the service options must be a JSON object of ",
             key_list(), ", not ", object.dump());
  ServiceLimits limits;
  for (const auto& [key, value] : object.items()) {
    if (key == "model_name") {
      limits.model_name = text_value(value, key);
      continue;
    }
    if (key == "api_key") {
      limits.api_key = text_value(value, key);
      OASR_CHECK(!limits.api_key.empty(), kInvalidArgument,
                 "service option 'api_key' is empty, which would leave the service open; give a "
                 "key or leave api_key out");
      continue;
    }
    const LimitSpec* spec = nullptr;
    for (const LimitSpec& candidate : kLimits) {
      if (key == candidate.key) spec = &candidate;
    }
    OASR_CHECK(spec != nullptr, kInvalidArgument, "unknown service option '", key,
               "'; the options are ", key_list());
    const double number = number_value(value, *spec);
    if (spec->integer != nullptr) {
      limits.*spec->integer = static_cast<int64_t>(number);
    } else {
      limits.*spec->real = number;
    }
  }
  return limits;
}

ServiceOptions service_options(const engine::ASREngine& engine, const ServiceLimits& limits) {
  const engine::EngineConfig& config = engine.config();
  ServiceOptions options;
  options.model_name =
      limits.model_name.empty()
          ? std::filesystem::absolute(config.ckpt_dir).lexically_normal().filename().string()
          : limits.model_name;
  if (options.model_name.empty()) options.model_name = "oasr";
  options.max_upload_bytes = static_cast<size_t>(limits.max_upload_mb * (1 << 20));
  options.max_audio_seconds = limits.max_audio_seconds;
  options.max_stream_seconds = limits.max_audio_seconds;
  // The limit is the loaded model's where it takes less: an upload it cannot
  // take then gets 422 with the limit, not a 400 from deep in the decoder.
  const engine::Recognizer::AudioLimit model_limit = engine.audio_limit();
  if (model_limit.seconds < options.max_audio_seconds) {
    log::info(
        "the audio limit of {} s (--max-audio-seconds) is over what this {} model takes at once: "
        "{} s ({}); audio is limited to {} s",
        limits.max_audio_seconds, engine.architecture().display_name, model_limit.seconds,
        model_limit.why, model_limit.seconds);
    options.max_audio_seconds = model_limit.seconds;
    std::ostringstream note;
    note << "the " << engine.architecture().display_name << " model takes at most "
         << model_limit.seconds << " s at once (" << model_limit.why << ")";
    options.audio_limit_note = note.str();
  }
  options.request_timeout = std::chrono::seconds(limits.request_timeout_s);
  options.api_key = limits.api_key;
  options.max_batch = config.max_batch_size;
  options.max_batch_delay = std::chrono::milliseconds(limits.max_batch_delay_ms);
  options.max_queue = static_cast<size_t>(limits.max_queue);
  options.stream_threads = static_cast<int>(limits.stream_threads);
  return options;
}

}  // namespace oasr::server
