// The HTTP API; see service.h.
#include "server/service.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "audio/audio_file.h"
#include "core/error.h"
#include "core/json_error.h"
#include "engine/engine_options.h"
#include "models/architecture.h"
#include "server/multipart.h"
#include "server/response_formats.h"

namespace oasr::server {
namespace {

using Clock = std::chrono::steady_clock;

// Boost 1.74's beast::string_view is boost::string_view.
std::string_view header(const Request& request, http::field field) {
  const auto value = request[field];
  return {value.data(), value.size()};
}

// Constant time in the key's length: a wrong key's prefix is not timed out.
bool same_secret(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

// The decode keys a request may set as form fields: every key (and alias)
// a registered architecture declares (models::declared_decode_options()).
const std::set<std::string>& decode_fields() {
  static const std::set<std::string> fields = [] {
    std::set<std::string> out;
    for (const models::DeclaredDecodeOption& option : models::declared_decode_options()) {
      out.insert(option.spec.key);
      out.insert(option.spec.aliases.begin(), option.spec.aliases.end());
    }
    return out;
  }();
  return fields;
}

struct HttpFailure {
  http::status status;
  std::string type;
  std::string code;
  std::string message;
};

HttpFailure bad_request(const std::string& code, const std::string& message) {
  return {http::status::bad_request, "invalid_request_error", code, message};
}

}  // namespace

TranscriptionService::TranscriptionService(const engine::ASREngine& engine, ServiceOptions options)
    : engine_(engine),
      options_(std::move(options)),
      stream_pool_(std::make_unique<boost::asio::thread_pool>(
          static_cast<size_t>(std::max(1, options_.stream_threads)))) {
  BatcherOptions batching;
  batching.max_batch = options_.max_batch;
  batching.max_delay = options_.max_batch_delay;
  batching.max_queue = options_.max_queue;
  batcher_ = std::make_unique<Batcher>(engine_, batching, [this](size_t size, double seconds) {
    metrics_.observe_batch(size, seconds);
  });
}

TranscriptionService::~TranscriptionService() {
  drain();
  stream_pool_->join();  // a stream's chunk in flight finishes; its session is gone
}

void TranscriptionService::drain() {
  draining_ = true;
  batcher_->stop();
}

Response TranscriptionService::respond(const Request& request, const std::string& route,
                                       http::status status, std::string content_type,
                                       std::string body) const {
  Response response{status, request.version()};
  response.set(http::field::server, "oasr-server");
  response.set(http::field::content_type, content_type);
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  response.prepare_payload();
  metrics_.count_request(route, static_cast<int>(status));
  return response;
}

Response TranscriptionService::error(const Request& request, const std::string& route,
                                     http::status status, const std::string& type,
                                     const std::string& code, const std::string& message) const {
  nlohmann::json body = {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
  Response response = respond(request, route, status, "application/json", body.dump());
  if (status == http::status::service_unavailable || status == http::status::too_many_requests) {
    response.set(http::field::retry_after, "1");
  }
  if (status == http::status::unauthorized) response.set(http::field::www_authenticate, "Bearer");
  return response;
}

Response TranscriptionService::too_large(const Request& request) const {
  return error(request, "/v1/audio/transcriptions", http::status::payload_too_large,
               "invalid_request_error", "request_too_large",
               "the request body is over --max-upload-mb (" +
                   std::to_string(options_.max_upload_bytes >> 20) +
                   " MB); send a shorter or compressed file");
}

void TranscriptionService::handle(Request request, Reply reply) {
  const std::string target(request.target());
  const std::string path = target.substr(0, target.find('?'));
  const auto only = [&](http::verb verb) {
    if (request.method() == verb) return true;
    reply(error(request, path, http::status::method_not_allowed, "invalid_request_error",
                "method_not_allowed",
                std::string(request.method_string()) + " " + path + ": use " +
                    std::string(http::to_string(verb))));
    return false;
  };
  if (path == "/health") {
    if (only(http::verb::get))
      reply(respond(request, path, http::status::ok, "application/json", R"({"status":"ok"})"));
    return;
  }
  if (path == "/ready") {
    if (!only(http::verb::get)) return;
    if (draining_) {
      reply(error(request, path, http::status::service_unavailable, "server_error", "draining",
                  "the server is shutting down"));
    } else {
      reply(respond(request, path, http::status::ok, "application/json", R"({"status":"ready"})"));
    }
    return;
  }
  if (path == "/metrics") {
    if (only(http::verb::get)) {
      reply(respond(request, path, http::status::ok, "text/plain; version=0.0.4",
                    metrics_.render(batcher_->queue_depth(), device_memory())));
    }
    return;
  }
  // The API routes take the key when one is configured; probes do not.
  if (auto refused = refuse_unauthorized(request, path)) {
    reply(std::move(*refused));
    return;
  }
  if (path == "/v1/models") {
    if (!only(http::verb::get)) return;
    nlohmann::json model = {{"id", options_.model_name},
                            {"object", "model"},
                            {"owned_by", "oasr"},
                            {"architecture", engine_.architecture().name}};
    reply(respond(request, path, http::status::ok, "application/json",
                  nlohmann::json{{"object", "list"}, {"data", {model}}}.dump()));
    return;
  }
  if (path == "/v1/quantization") {
    if (only(http::verb::get)) {
      const quant::QuantizationInfo& info = engine_.quantization_info();
      nlohmann::json layers = nlohmann::json::array();
      for (const quant::LayerReport& layer : info.layers) {
        layers.push_back({{"path", layer.path},
                          {"scheme", layer.scheme},
                          {"lane", layer.lane},
                          {"kernel", layer.kernel},
                          {"input_quantizer", layer.input_quantizer}});
      }
      nlohmann::json body = {{"summary", info.summary()},
                             {"quantized_layers", info.quantized_layers()},
                             {"layers", layers}};
      reply(respond(request, path, http::status::ok, "application/json", body.dump()));
    }
    return;
  }
  if (path == "/v1/audio/stream") {
    reply(error(request, path, http::status::upgrade_required, "invalid_request_error",
                "upgrade_required",
                "/v1/audio/stream is a WebSocket: connect with a WebSocket client (ws://...)"));
    return;
  }
  if (path == "/v1/audio/transcriptions") {
    if (only(http::verb::post)) transcribe(request, std::move(reply));
    return;
  }
  reply(error(request, path, http::status::not_found, "invalid_request_error", "not_found",
              "no route " + path +
                  "; this server answers POST /v1/audio/transcriptions, GET "
                  "/v1/models, /v1/quantization, /health, /ready, /metrics and the WebSocket "
                  "/v1/audio/stream"));
}

DeviceMemory TranscriptionService::device_memory() const {
  const Device device = engine_.config().served_device();
  return device.is_cuda() ? cuda_memory(device.index) : DeviceMemory{};
}

std::optional<Response> TranscriptionService::refuse_unauthorized(const Request& request,
                                                                  const std::string& route) const {
  if (options_.api_key.empty()) return std::nullopt;
  const std::string_view auth = header(request, http::field::authorization);
  const std::string_view scheme = "Bearer ";
  const bool bearer = auth.size() > scheme.size() && auth.substr(0, scheme.size()) == scheme;
  if (bearer && same_secret(auth.substr(scheme.size()), options_.api_key)) return std::nullopt;
  return error(request, route, http::status::unauthorized, "invalid_request_error",
               "invalid_api_key",
               bearer ? "the API key is not this server's (--api-key)"
                      : "missing 'Authorization: Bearer <key>' header; this server was started "
                        "with --api-key");
}

TranscriptionService::StreamStart TranscriptionService::start_stream(
    const std::string& first_message) const {
  nlohmann::json start;
  try {
    start = nlohmann::json::parse(first_message);
  } catch (const nlohmann::json::exception& e) {
    OASR_THROW(kInvalidArgument, "the first message is not JSON (", json_error_text(e),
               "); send {\"sample_rate\": ", engine_.sample_rate(),
               ", \"format\": \"pcm_s16le\"} before the audio");
  }
  OASR_CHECK(start.is_object(), kInvalidArgument,
             "the first message must be a JSON object with \"sample_rate\"");
  StreamStart out;
  const auto rate = start.find("sample_rate");
  OASR_CHECK(rate != start.end() && rate->is_number_integer(), kInvalidArgument,
             "the first message needs \"sample_rate\" (an integer; this model takes ",
             engine_.sample_rate(), ")");
  // Other rates are resampled as the stream arrives (audio::StreamResampler:
  // the same audio as a file of that rate gives `oasr transcribe`).
  OASR_CHECK(
      rate->get<int64_t>() >= kMinStreamSampleRate && rate->get<int64_t>() <= kMaxStreamSampleRate,
      kInvalidArgument, "\"sample_rate\" ", rate->dump(), ": expected ", kMinStreamSampleRate,
      " to ", kMaxStreamSampleRate, " Hz (this model takes ", engine_.sample_rate(),
      "; other rates are resampled)");
  out.sample_rate = static_cast<int>(rate->get<int64_t>());
  start.erase("sample_rate");
  if (const auto format = start.find("format"); format != start.end()) {
    const std::string value = format->is_string() ? format->get<std::string>() : format->dump();
    OASR_CHECK(value == "pcm_s16le" || value == "pcm_f32le", kInvalidArgument, "\"format\" '",
               value, "': expected pcm_s16le (16-bit integers) or pcm_f32le (float32 in [-1, 1))");
    out.format = value == "pcm_f32le" ? SampleFormat::kF32 : SampleFormat::kS16;
    start.erase("format");
  }
  if (const auto model = start.find("model"); model != start.end()) {
    OASR_CHECK(model->is_string() && model->get<std::string>() == options_.model_name, kNotFound,
               "\"model\" ", model->dump(), " is not served here; this server serves '",
               options_.model_name, "'");
    start.erase("model");
  }
  engine::DecodeOverrides overrides = engine::decode_overrides_from_json(start);
  // A stream decodes chunk by chunk: 16 encoder frames unless the request or
  // the engine's defaults say otherwise (where the architecture has chunks).
  const bool chunked =
      engine::find_decode_spec(engine_.architecture().decode_options, "chunk_size") != nullptr;
  if (chunked && !overrides.has("chunk_size") &&
      engine_.decode_options().find<int64_t>("chunk_size").value_or(-1) <= 0) {
    overrides.set("chunk_size", int64_t{16});
  }
  out.session = engine_.start_session(overrides);
  const engine::Recognizer::AudioLimit model = engine_.audio_limit(overrides);
  out.max_seconds = options_.max_stream_seconds;
  out.limit_why = "--max-audio-seconds";
  if (model.seconds < out.max_seconds) {
    out.max_seconds = model.seconds;
    out.limit_why = "what the model takes at once: " + model.why +
                    "; a U2++ stream with \"endpoint\": true has no such limit";
  }
  return out;
}

void TranscriptionService::transcribe(const Request& request, Reply reply) {
  const std::string route = "/v1/audio/transcriptions";
  const auto started = Clock::now();
  const auto fail = [&](const HttpFailure& f) {
    reply(error(request, route, f.status, f.type, f.code, f.message));
  };
  if (draining_) {
    fail({http::status::service_unavailable, "server_error", "draining",
          "the server is shutting down; retry on another instance"});
    return;
  }
  std::vector<FormPart> parts;
  try {
    const std::string boundary = multipart_boundary(header(request, http::field::content_type));
    parts = parse_multipart(request.body(), boundary);
  } catch (const Error& e) {
    const bool media = header(request, http::field::content_type).find("multipart/form-data") ==
                       std::string_view::npos;
    fail(media ? HttpFailure{http::status::unsupported_media_type, "invalid_request_error",
                             "unsupported_media_type", e.what()}
               : bad_request("invalid_multipart", e.what()));
    return;
  }
  const FormPart* file = nullptr;
  std::string model;
  ResponseFormat format = ResponseFormat::kJson;
  engine::OptionList decode_options;
  std::set<std::string> seen;
  try {
    for (const FormPart& part : parts) {
      OASR_CHECK(seen.insert(part.name).second || part.name == "timestamp_granularities[]",
                 kInvalidArgument, "field '", part.name, "' is given twice");
      const std::string value(part.data);
      if (part.name == "file") {
        file = &part;
      } else if (part.name == "model") {
        model = value;
      } else if (part.name == "response_format") {
        format = parse_response_format(value);
      } else if (part.name == "temperature") {
        OASR_CHECK(value == "0" || value == "0.0", kInvalidArgument, "field 'temperature': '",
                   value, "' is not served; decoding is deterministic (temperature 0)");
      } else if (part.name == "timestamp_granularities[]") {
        OASR_CHECK(value == "segment", kInvalidArgument, "field 'timestamp_granularities[]': '",
                   value, "' is not served; only segment (with response_format verbose_json)");
      } else if (decode_fields().count(part.name) != 0) {
        decode_options.emplace_back(part.name, value);
      } else if (part.name == "language" || part.name == "prompt" || part.name == "stream" ||
                 part.name == "chunking_strategy" || part.name == "include[]") {
        OASR_THROW(kInvalidArgument, "field '", part.name,
                   "' is not supported by this server; leave it out");
      } else {
        OASR_THROW(kInvalidArgument, "unknown field '", part.name,
                   "'; the form takes file, model, response_format, temperature, "
                   "timestamp_granularities[] and the decode options (beam_size, ...)");
      }
    }
    OASR_CHECK(file != nullptr, kInvalidArgument,
               "field 'file' is missing: send the audio as the multipart field 'file'");
    OASR_CHECK(!model.empty(), kInvalidArgument, "field 'model' is missing; this server serves '",
               options_.model_name, "'");
  } catch (const Error& e) {
    fail(bad_request("invalid_field", e.what()));
    return;
  }
  if (model != options_.model_name) {
    fail({http::status::not_found, "invalid_request_error", "model_not_found",
          "model '" + model + "' is not served here; GET /v1/models lists '" + options_.model_name +
              "'"});
    return;
  }
  engine::DecodeOverrides overrides;
  try {
    overrides = engine::decode_overrides_from_options(decode_options);
    // verbose_json, srt and vtt carry segments: a model that times them
    // itself is asked to, unless the request said otherwise.
    const bool wants_segments = format == ResponseFormat::kVerboseJson ||
                                format == ResponseFormat::kSrt || format == ResponseFormat::kVtt;
    if (wants_segments && !overrides.has("timestamps") &&
        engine_.architecture().decodes_timestamps) {
      overrides.set("timestamps", true);
    }
    (void)engine_.resolve_decode(overrides);  // refused now, not in the batch
  } catch (const Error& e) {
    fail(bad_request("invalid_field", e.what()));
    return;
  }
  const std::string label =
      "field 'file' (" + (file->filename.empty() ? std::string("unnamed") : file->filename) + ")";
  audio::DecodedAudio audio;
  try {
    audio::AudioLoadOptions load;
    load.target_sample_rate = engine_.sample_rate();
    audio = audio::load_audio_from_memory(file->data, label, load);
  } catch (const Error& e) {
    fail(bad_request("invalid_audio", e.what()));
    return;
  }
  const double duration = audio.duration_seconds();
  if (duration > options_.max_audio_seconds) {
    std::ostringstream message;
    // Enough digits that audio just over the limit does not print as equal.
    message << std::setprecision(10) << label << ": " << duration
            << " s of audio is over --max-audio-seconds (" << options_.max_audio_seconds << ")";
    if (!options_.audio_limit_note.empty()) message << "; " << options_.audio_limit_note;
    fail({http::status::unprocessable_entity, "invalid_request_error", "audio_too_long",
          message.str()});
    return;
  }
  BatchJob job;
  job.samples = std::move(audio.samples);
  job.overrides = overrides;
  job.label = label;
  job.deadline = started + options_.request_timeout;
  // What the reply needs of the request (version, keep-alive) travels with
  // the job, not the upload.
  auto shared_request = std::make_shared<Request>();
  shared_request->version(request.version());
  shared_request->keep_alive(request.keep_alive());
  job.done = [this, shared_request, reply, format, duration, started,
              route](engine::UtteranceResult result) {
    if (!result.ok()) {
      const Error& e = *result.error;
      const bool timeout = Batcher::is_timeout(e);
      const bool internal = e.code() == ErrorCode::kInternal || e.code() == ErrorCode::kOutOfMemory;
      reply(error(*shared_request, route,
                  timeout    ? http::status::gateway_timeout
                  : internal ? http::status::internal_server_error
                             : http::status::bad_request,
                  internal || timeout ? "server_error" : "invalid_request_error",
                  timeout    ? "timeout"
                  : internal ? "internal_error"
                             : "invalid_audio",
                  e.what()));
      return;
    }
    const Rendered rendered = render_transcript(format, *result.transcript, duration);
    metrics_.observe_request(std::chrono::duration<double>(Clock::now() - started).count(),
                             duration);
    reply(respond(*shared_request, route, http::status::ok, rendered.content_type, rendered.body));
  };
  switch (batcher_->submit(std::move(job))) {
    case Batcher::Admission::kQueued:
      return;
    case Batcher::Admission::kQueueFull:
      fail({http::status::too_many_requests, "rate_limit_error", "queue_full",
            "the queue holds --max-queue (" + std::to_string(options_.max_queue) +
                ") utterances; retry after the Retry-After seconds"});
      return;
    case Batcher::Admission::kStopping:
      fail({http::status::service_unavailable, "server_error", "draining",
            "the server is shutting down; retry on another instance"});
      return;
  }
}

}  // namespace oasr::server
