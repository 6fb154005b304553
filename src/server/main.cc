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
#include "server/service_options.h"

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
          return "'" + text + "' is not a number in [" + oasr::server::limit_text(min) + ", " +
                 oasr::server::limit_text(max) + "]";
        }
        return {};
      },
      "NUMBER in [" + oasr::server::limit_text(min) + " - " + oasr::server::limit_text(max) + "]");
}

struct ServerFlags {
  oasr::server::ListenOptions listen;
  oasr::server::ServiceLimits limits;
  int64_t idle_timeout_s = 30;
};

void run(const oasr::cli::EngineFlags& engine_flags, const ServerFlags& flags) {
  using namespace oasr;
  const engine::EngineConfig config = engine_flags.to_config();
  const engine::ASREngine engine(config);
  const server::ServiceOptions options = server::service_options(engine, flags.limits);
  const quant::QuantizationInfo& info = engine.quantization_info();
  log::info("model '{}': {} ({}), device {}, dtype {}", options.model_name,
            engine.architecture().display_name, config.ckpt_dir.string(), config.device,
            dtype_name(config.served_dtype()));
  for (const quant::LayerReport& layer : info.layers) {
    log::info("  {} {} lane {} kernel {} input {}", layer.path, layer.scheme, layer.lane,
              layer.kernel, layer.input_quantizer);
  }
  const std::string batching =
      engine.decodes_continuously()
          ? "continuous batching of up to " + std::to_string(options.max_batch) + " requests"
          : "batch " + std::to_string(options.max_batch) + " within " +
                std::to_string(flags.limits.max_batch_delay_ms) + " ms";
  log::info("limits: {}, queue {}, upload {} MB, audio {} s, timeout {} s, idle {} s, api key {}",
            batching, options.max_queue, flags.limits.max_upload_mb, options.max_audio_seconds,
            flags.limits.request_timeout_s, flags.idle_timeout_s,
            options.api_key.empty() ? "off" : "on");
  if (options.api_key.empty()) {
    log::warn("no --api-key: the /v1 routes answer anyone who can reach {}", flags.listen.host);
  }
  server::TranscriptionService service(engine, options);
  server::ListenOptions listen = flags.listen;
  listen.idle_timeout = std::chrono::seconds(flags.idle_timeout_s);
  server::serve(service, listen);
}

// The service limits as flags (--max-upload-mb, ...): names, ranges and help
// from server/service_options.h, which oasr.ray's config reader shares.
void add_limit_flags(CLI::App& app, oasr::server::ServiceLimits& limits) {
  size_t count = 0;
  const oasr::server::LimitSpec* specs = oasr::server::limit_specs(&count);
  for (size_t i = 0; i < count; ++i) {
    const oasr::server::LimitSpec& spec = specs[i];
    std::string flag = std::string("--") + spec.key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    CLI::Option* option = spec.integer != nullptr
                              ? app.add_option(flag, limits.*spec.integer, spec.help)
                              : app.add_option(flag, limits.*spec.real, spec.help);
    option->check(finite_range(spec.min, spec.max));
  }
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
  app.add_option("--model-name", flags.limits.model_name,
                 "the model id clients send as 'model' (default: the --ckpt-dir folder's name)");
  add_limit_flags(app, flags.limits);
  app.add_option("--idle-timeout-s", flags.idle_timeout_s,
                 "a client silent this long (between or inside requests) is dropped (default 30)")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}));
  app.add_option("--api-key", flags.limits.api_key,
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
