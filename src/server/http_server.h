// The HTTP/1.1 transport of oasr-server, on Boost.Beast: async sessions
// over a pool of --threads io threads, per-connection timeouts (a slow or
// silent client is dropped, never holds a thread), header and body limits
// (an oversized upload gets 413 before it is read), keep-alive, and a
// graceful stop (SIGTERM / SIGINT): the listener closes, queued
// transcriptions finish and are answered, then the process exits 0.
#pragma once

#include <chrono>
#include <string>

#include "server/service.h"

namespace oasr::server {

struct ListenOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (the bound one is logged)
  int threads = 4;
  std::chrono::seconds idle_timeout{30};  // between requests, and per read of one
};

// Serves until SIGTERM or SIGINT; returns when drained.
void serve(TranscriptionService& service, const ListenOptions& options);

}  // namespace oasr::server
