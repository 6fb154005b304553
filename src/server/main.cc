// oasr-server: the engine behind OpenAI's transcription API (server/service.h)
// on Boost.Beast (server/http_server.h). It takes the CLI's engine flags
// (cli/engine_options.h: --ckpt-dir, --device, --dtype, --quantization,
// --quantization-option, --max-batch-size, decode defaults) and its own.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "cli/engine_options.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/logging.h"
#include "server/http_server.h"
#include "server/service.h"

namespace {

std::string single_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// CLI::Range lets NaN through (every comparison with it is false), which
// would start the server with that limit off; this one refuses it by name.
CLI::Validator finite_range(double min, double max) {
  return CLI::Validator(
      [min, max](const std::string& text) -> std::string {
        double value = 0.0;
        size_t used = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || text.empty() || !std::isfinite(value) || value < min ||
            value > max) {
          return "'" + text + "' is not a number in [" + CLI::detail::to_string(min) + ", " +
                 CLI::detail::to_string(max) + "]";
        }
        return {};
      },
      "NUMBER in [" + CLI::detail::to_string(min) + " - " + CLI::detail::to_string(max) + "]");
}

struct ServerFlags {
  oasr::server::ListenOptions listen;
  std::string model_name;
  int64_t max_batch_delay_ms = 10;
  int64_t max_queue = 256;
  double max_upload_mb = 25.0;
  double max_audio_seconds = 600.0;
  int64_t request_timeout_s = 120;
  int64_t idle_timeout_s = 30;
  int64_t stream_threads = 2;
  std::string api_key;
};

void run(const oasr::cli::EngineFlags& engine_flags, const ServerFlags& flags) {
  using namespace oasr;
  const engine::EngineConfig config = engine_flags.to_config();
  const engine::ASREngine engine(config);
  server::ServiceOptions options;
  options.model_name =
      flags.model_name.empty()
          ? std::filesystem::absolute(config.ckpt_dir).lexically_normal().filename().string()
          : flags.model_name;
  if (options.model_name.empty()) options.model_name = "oasr";
  options.max_upload_bytes = static_cast<size_t>(flags.max_upload_mb * (1 << 20));
  options.max_audio_seconds = flags.max_audio_seconds;
  options.max_stream_seconds = flags.max_audio_seconds;
  // The limit is the loaded model's where it takes less: an upload it cannot
  // take then gets 422 with the limit, not a 400 from deep in the decoder.
  const engine::Recognizer::AudioLimit model_limit = engine.audio_limit();
  if (model_limit.seconds < options.max_audio_seconds) {
    log::info(
        "the audio limit of {} s (--max-audio-seconds) is over what this {} model takes at "
        "once: {} s ({}); audio is limited to {} s",
        flags.max_audio_seconds, engine.architecture().display_name, model_limit.seconds,
        model_limit.why, model_limit.seconds);
    options.max_audio_seconds = model_limit.seconds;
    std::ostringstream note;
    note << "the " << engine.architecture().display_name << " model takes at most "
         << model_limit.seconds << " s at once (" << model_limit.why << ")";
    options.audio_limit_note = note.str();
  }
  options.request_timeout = std::chrono::seconds(flags.request_timeout_s);
  options.api_key = flags.api_key;
  options.max_batch = config.max_batch_size;
  options.max_batch_delay = std::chrono::milliseconds(flags.max_batch_delay_ms);
  options.max_queue = static_cast<size_t>(flags.max_queue);
  options.stream_threads = static_cast<int>(flags.stream_threads);
  const quant::QuantizationInfo& info = engine.quantization_info();
  log::info("model '{}': {} ({}), device {}, dtype {}", options.model_name,
            engine.architecture().display_name, config.ckpt_dir.string(), config.device,
            dtype_name(config.served_dtype()));
  for (const quant::LayerReport& layer : info.layers) {
    log::info("  {} {} lane {} kernel {} input {}", layer.path, layer.scheme, layer.lane,
              layer.kernel, layer.input_quantizer);
  }
  log::info(
      "limits: batch {} within {} ms, queue {}, upload {} MB, audio {} s, timeout {} s, "
      "idle {} s, api key {}",
      options.max_batch, flags.max_batch_delay_ms, options.max_queue, flags.max_upload_mb,
      options.max_audio_seconds, flags.request_timeout_s, flags.idle_timeout_s,
      options.api_key.empty() ? "off" : "on");
  if (options.api_key.empty()) {
    log::warn("no --api-key: the /v1 routes answer anyone who can reach {}", flags.listen.host);
  }
  server::TranscriptionService service(engine, options);
  server::ListenOptions listen = flags.listen;
  listen.idle_timeout = std::chrono::seconds(flags.idle_timeout_s);
  server::serve(service, listen);
}

// glibc gives each thread that meets a locked heap an arena of its own (up
// to eight per core), and each arena keeps the largest working set its
// threads have served (the CPU backend turns trimming off, core/device.cc):
// a long-running server's resident memory rose in ~23 MiB steps for as long
// as new arenas formed (287 -> 343 MiB over 150 s of the soak; 274 -> 290
// MiB with this, bench/README.md). One arena per core bounds that, with
// throughput within this machine's noise (115-120 rounds in 150 s either
// way). MALLOC_ARENA_MAX, when set, is the operator's and is kept.
void bound_malloc_arenas() {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  const int cores = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  mallopt(M_ARENA_MAX, cores);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  bound_malloc_arenas();
  CLI::App app{"oasr-server: OpenAI-compatible speech recognition over HTTP"};
  app.set_version_flag("--version", std::string("oasr-server ") + OASR_VERSION);
  oasr::cli::EngineFlags engine_flags;
  oasr::cli::add_engine_flags(app, engine_flags);
  ServerFlags flags;
  app.add_option("--host", flags.listen.host, "address to listen on (default 127.0.0.1)");
  app.add_option("--port", flags.listen.port, "TCP port (default 8000; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--http-threads", flags.listen.threads,
                 "HTTP io threads (default 4; --threads sets the engine's CPU threads)")
      ->check(CLI::Range(1, 256));
  app.add_option("--model-name", flags.model_name,
                 "the model id clients send as 'model' (default: the --ckpt-dir folder's name)");
  app.add_option("--max-batch-delay-ms", flags.max_batch_delay_ms,
                 "how long the oldest queued utterance waits for company (default 10)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000}));
  app.add_option("--max-queue", flags.max_queue, "utterances queued before 429 (default 256)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--max-upload-mb", flags.max_upload_mb, "largest request body (default 25)")
      ->check(finite_range(0.001, 4096.0));
  app.add_option("--max-audio-seconds", flags.max_audio_seconds,
                 "longest audio accepted, 422 beyond (default 600)")
      ->check(finite_range(0.1, 7200.0));
  app.add_option("--request-timeout-s", flags.request_timeout_s,
                 "a request still queued after this gets 504 (default 120)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  app.add_option("--idle-timeout-s", flags.idle_timeout_s,
                 "a client silent this long (between or inside requests) is dropped (default 30)")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}));
  app.add_option("--stream-threads", flags.stream_threads,
                 "threads decoding WebSocket streams' chunks, apart from the HTTP io threads "
                 "(default 2)")
      ->check(CLI::Range(int64_t{1}, int64_t{256}));
  app.add_option("--api-key", flags.api_key,
                 "require 'Authorization: Bearer KEY' on the /v1 routes (default: none)")
      ->check(CLI::Validator(
          [](const std::string& key) -> std::string {
            // An empty key would silently start an open server.
            return key.empty() ? "an empty key would leave the server open; give a key or "
                                 "leave --api-key out"
                               : "";
          },
          "KEY"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "oasr-server: error: " << single_line(e.what()) << " (see 'oasr-server --help')\n";
    return 2;
  }
  try {
    // A server logs its start-up, its address and its drain; OASR_LOG_LEVEL
    // still overrides (the CLI's default is warn).
    if (std::getenv("OASR_LOG_LEVEL") == nullptr) oasr::log::set_level("info");
    run(engine_flags, flags);
  } catch (const oasr::Error& e) {
    std::cerr << "oasr-server: error: " << single_line(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "oasr-server: internal error: " << single_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}
