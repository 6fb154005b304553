// GET /v1/audio/stream: a WebSocket (Boost.Beast) carrying one streaming
// session (engine::StreamingSession, the chunked computation `oasr
// transcribe --chunk-size N` runs offline, so the final text equals it).
//
// Protocol, client -> server:
//   1. a text message {"sample_rate": N, "format": "pcm_s16le"|"pcm_f32le",
//      "model"?, decode options?} (TranscriptionService::start_stream);
//   2. binary messages of little-endian PCM, any size (a sample split
//      across messages is joined);
//   3. a text message {"type": "end"}.
// Server -> client: {"type": "partial", "text"} whenever the text grows,
// {"type": "final", "text", "tokens", "duration"} after the end, then a
// normal close; on a bad message {"type": "error", "error": {"message",
// "type", "code"}} and a policy-violation close. A client silent for the
// idle timeout is dropped; a stream over --max-audio-seconds is refused.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <memory>

#include "server/http_server.h"
#include "server/service.h"

namespace oasr::server {

// Takes over `socket` after `request` asked for the WebSocket upgrade.
void start_stream_session(boost::asio::ip::tcp::socket socket, Request request,
                          TranscriptionService& service, const ListenOptions& options);

}  // namespace oasr::server
