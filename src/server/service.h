// The HTTP API of oasr-server, independent of the transport
// (server/http_server.h): OpenAI's POST /v1/audio/transcriptions, GET
// /v1/models, /health, /ready, /metrics and /v1/quantization. Errors are
// JSON shaped as OpenAI's API shapes them: {"error": {"message", "type",
// "code"}}, with the status the failure deserves (400 bad field or audio,
// 401 bad key, 404, 405, 413, 415, 422 audio too long, 503 queue full with
// Retry-After, 504 timed out).
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/device_memory.h"
#include "engine/asr_engine.h"
#include "server/batcher.h"
#include "server/metrics.h"

namespace oasr::server {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

struct ServiceOptions {
  std::string model_name;  // what GET /v1/models lists and `model` must name
  size_t max_upload_bytes = 25u << 20;
  double max_audio_seconds = 600.0;
  // Why max_audio_seconds is below the flag's value, where the loaded model
  // takes less ("the U2++ model takes at most 200 s at once: ..."); "" else.
  std::string audio_limit_note;
  // --max-audio-seconds as given: a stream is held to it and to what the
  // model takes with the stream's own decode options (unbounded for a U2++
  // stream with endpointing), not to max_audio_seconds.
  double max_stream_seconds = 600.0;
  std::chrono::seconds request_timeout{120};
  std::string api_key;  // empty: no authentication
  int64_t max_batch = 16;
  std::chrono::milliseconds max_batch_delay{10};
  size_t max_queue = 256;
  // Threads that run WebSocket streams' chunk computations, so a long chunk
  // never holds an HTTP io thread.
  int stream_threads = 2;
};

class TranscriptionService {
 public:
  using Reply = std::function<void(Response)>;

  TranscriptionService(const engine::ASREngine& engine, ServiceOptions options);
  ~TranscriptionService();

  // Answers `request` through `reply`, at once or later from the batch
  // worker's thread; `reply` is called exactly once.
  void handle(Request request, Reply reply);
  // The response to a body over the upload limit (the transport refuses it
  // before it is read whole).
  Response too_large(const Request& request) const;

  // An OpenAI-shaped error reply to `request` (the transport uses it for
  // requests it cannot parse).
  Response error(const Request& request, const std::string& route, http::status status,
                 const std::string& type, const std::string& code,
                 const std::string& message) const;

  // GET /v1/audio/stream (server/stream_session.h): the first text message
  // {"sample_rate": N, "format": "pcm_s16le" | "pcm_f32le", "model"?, decode
  // options?} opens a streaming session; refused (oasr::Error naming the key)
  // when the model does not stream, the rate is not the model's, or a key is
  // unknown. Without chunk_size a session decodes in chunks of 16 frames.
  enum class SampleFormat { kS16, kF32 };
  // The PCM rates a stream may declare (telephone to studio).
  static constexpr int64_t kMinStreamSampleRate = 4000;
  static constexpr int64_t kMaxStreamSampleRate = 192000;
  struct StreamStart {
    std::unique_ptr<engine::StreamingSession> session;
    SampleFormat format = SampleFormat::kS16;
    int sample_rate = 0;       // of the client's PCM; resampled to the engine's where it differs
    double max_seconds = 0.0;  // the stream's length limit
    std::string limit_why;     // what sets it, for the refusal
  };
  StreamStart start_stream(const std::string& first_message) const;
  // Checks the Authorization header of a request when --api-key is set;
  // empty when it passes, else the 401 reply.
  std::optional<Response> refuse_unauthorized(const Request& request,
                                              const std::string& route) const;
  void count_request(const std::string& route, int status) const {
    metrics_.count_request(route, status);
  }

  // Stop taking transcriptions (503) and finish the queued ones.
  void drain();
  bool draining() const { return draining_; }
  const ServiceOptions& options() const { return options_; }
  int engine_sample_rate() const { return engine_.sample_rate(); }
  // Where streams decode (ServiceOptions::stream_threads threads).
  boost::asio::thread_pool& stream_pool() { return *stream_pool_; }

 private:
  void transcribe(const Request& request, Reply reply);
  DeviceMemory device_memory() const;  // of the served device; -1s on the CPU
  Response respond(const Request& request, const std::string& route, http::status status,
                   std::string content_type, std::string body) const;

  const engine::ASREngine& engine_;
  ServiceOptions options_;
  mutable Metrics metrics_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<boost::asio::thread_pool> stream_pool_;
  std::atomic<bool> draining_{false};
};

}  // namespace oasr::server
