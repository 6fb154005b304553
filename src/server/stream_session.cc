// The WebSocket streaming session; see stream_session.h.
#include "server/stream_session.h"

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "audio/audio_file.h"
#include "audio/resample.h"
#include "core/error.h"

namespace oasr::server {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

constexpr const char* kRoute = "/v1/audio/stream";

// [{"start", "end", "text"}, ...] in seconds of the stream.
nlohmann::json segments_json(const std::vector<engine::Segment>& segments) {
  nlohmann::json out = nlohmann::json::array();
  for (const engine::Segment& s : segments) {
    out.push_back({{"start", s.start}, {"end", s.end}, {"text", s.text}});
  }
  return out;
}
constexpr size_t kMaxMessageBytes = 4u << 20;

class StreamSession : public std::enable_shared_from_this<StreamSession> {
 public:
  StreamSession(tcp::socket socket, TranscriptionService& service, const ListenOptions& options)
      : ws_(std::move(socket)), service_(service), options_(options) {}

  void run(Request request) {
    beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts below
    websocket::stream_base::timeout timeout{};
    timeout.handshake_timeout = options_.idle_timeout;
    timeout.idle_timeout = options_.idle_timeout;
    timeout.keep_alive_pings = false;
    ws_.set_option(timeout);
    ws_.read_message_max(kMaxMessageBytes);
    ws_.async_accept(request, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->service_.count_request(kRoute, 101);
      self->read();
    });
  }

 private:
  void read() {
    buffer_.clear();
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return;  // closed, timed out, or a message over the limit: nothing to answer
      self->on_message();
    });
  }

  void on_message() {
    const std::string data = beast::buffers_to_string(buffer_.data());
    try {
      if (ws_.got_text()) {
        on_text(data);
      } else {
        on_audio(data);
      }
    } catch (const Error& e) {
      fail(e);
    }
  }

  void on_text(const std::string& data) {
    if (!stream_.session) {
      stream_ = service_.start_stream(data);
      max_samples_ = static_cast<size_t>(
          std::min(stream_.max_seconds * stream_.sample_rate, static_cast<double>(SIZE_MAX / 2)));
      if (stream_.sample_rate != service_.engine_sample_rate()) {
        resampler_.emplace(stream_.sample_rate, service_.engine_sample_rate());
      }
      read();
      return;
    }
    nlohmann::json message = nlohmann::json::parse(data, nullptr, false);
    OASR_CHECK(message.is_object() && message.value("type", "") == "end", kInvalidArgument,
               "after the first message, a text message must be {\"type\": \"end\"}; audio goes "
               "in binary messages");
    OASR_CHECK(carry_.empty(), kInvalidArgument, "the stream ends inside a sample (", carry_.size(),
               " stray bytes): send whole ",
               stream_.format == TranscriptionService::SampleFormat::kS16 ? "16-bit" : "32-bit",
               " samples");
    decode_then(
        [this] {
          if (resampler_) stream_.session->accept_waveform(resampler_->finish());
          return stream_.session->finish();
        },
        [this](engine::Transcript final) {
          nlohmann::json reply = {
              {"type", "final"},
              {"text", final.text},
              {"tokens", final.tokens},
              {"duration", static_cast<double>(samples_) / stream_.sample_rate}};
          if (!final.segments.empty()) reply["segments"] = segments_json(final.segments);
          send(reply.dump(), /*then_close=*/true);
        });
  }

  void on_audio(const std::string& data) {
    OASR_CHECK(stream_.session != nullptr, kInvalidArgument,
               "audio arrived before the first message; send {\"sample_rate\": ",
               service_.engine_sample_rate(), ", \"format\": \"pcm_s16le\"} first");
    const size_t width = stream_.format == TranscriptionService::SampleFormat::kS16 ? 2 : 4;
    carry_ += data;
    const size_t count = carry_.size() / width;
    std::vector<float> samples(count);
    for (size_t i = 0; i < count; ++i) {
      const char* p = carry_.data() + i * width;
      if (width == 2) {
        int16_t v;
        std::memcpy(&v, p, 2);
        samples[i] = static_cast<float>(v) / 32768.0f;
      } else {
        std::memcpy(&samples[i], p, 4);
      }
    }
    if (width == 4) {
      audio::check_samples(samples,
                           "pcm_f32le stream (from sample " + std::to_string(samples_) + ")");
    }
    carry_.erase(0, count * width);
    samples_ += count;
    OASR_CHECK(samples_ <= max_samples_, kInvalidArgument, "the stream is over its limit of ",
               stream_.max_seconds, " s (", stream_.limit_why, "); end it and start another");
    decode_then(
        [this, samples = std::move(samples)]() mutable {
          if (resampler_) samples = resampler_->process(samples);
          return stream_.session->accept_waveform(samples);
        },
        [this](engine::Transcript partial) {
          // With endpointing (a U2++ stream's `endpoint`), the segments this
          // audio ended ride on the partial message; its text is then the
          // new segment's.
          if (partial.text != last_partial_ || !partial.segments.empty()) {
            last_partial_ = partial.text;
            nlohmann::json message = {{"type", "partial"}, {"text", partial.text}};
            if (!partial.segments.empty()) message["segments"] = segments_json(partial.segments);
            send(message.dump(), false);
            return;
          }
          read();
        });
  }

  // Runs `work` (resampling and the session's chunk computations) on the
  // service's stream pool, then `done` with its transcript back on this
  // socket's executor; an error goes to fail(). Nothing reads the socket
  // meanwhile, so the session is never touched by two threads at once.
  template <class Work, class Done>
  void decode_then(Work work, Done done) {
    boost::asio::post(service_.stream_pool(), [self = shared_from_this(), work = std::move(work),
                                               done = std::move(done)]() mutable {
      std::optional<engine::Transcript> result;
      std::optional<Error> error;
      try {
        result = work();
      } catch (const Error& e) {
        error = e;
      } catch (const std::exception& e) {
        error = Error(ErrorCode::kInternal, std::string("stream decoding failed: ") + e.what());
      }
      boost::asio::post(self->ws_.get_executor(),
                        [self, result = std::move(result), error = std::move(error),
                         done = std::move(done)]() mutable {
                          if (error) {
                            self->fail(*error);
                            return;
                          }
                          done(std::move(*result));
                        });
    });
  }

  void fail(const Error& e) {
    service_.count_request(kRoute, 400);
    nlohmann::json reply = {
        {"type", "error"},
        {"error",
         {{"message", e.what()},
          {"type", "invalid_request_error"},
          {"code", e.code() == ErrorCode::kUnsupported ? "unsupported" : "invalid_stream"}}}};
    closing_code_ = websocket::close_code::policy_error;
    send(reply.dump(), true);
  }

  void send(std::string text, bool then_close) {
    outgoing_ = std::move(text);
    ws_.text(true);
    ws_.async_write(boost::asio::buffer(outgoing_),
                    [self = shared_from_this(), then_close](beast::error_code ec, size_t) {
                      if (ec) return;
                      if (then_close) {
                        self->ws_.async_close(self->closing_code_, [self](beast::error_code) {});
                        return;
                      }
                      self->read();
                    });
  }

  websocket::stream<beast::tcp_stream> ws_;
  TranscriptionService& service_;
  const ListenOptions& options_;
  beast::flat_buffer buffer_;
  TranscriptionService::StreamStart stream_;
  std::optional<audio::StreamResampler> resampler_;  // a client rate other than the model's
  std::string carry_;                                // bytes of a sample split across messages
  size_t samples_ = 0;
  size_t max_samples_ = 0;
  std::string last_partial_;
  std::string outgoing_;
  websocket::close_code closing_code_ = websocket::close_code::normal;
};

}  // namespace

void start_stream_session(tcp::socket socket, Request request, TranscriptionService& service,
                          const ListenOptions& options) {
  std::make_shared<StreamSession>(std::move(socket), service, options)->run(std::move(request));
}

}  // namespace oasr::server
