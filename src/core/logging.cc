#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/env.h"
#include "core/error.h"

namespace oasr::log {

namespace {
spdlog::level::level_enum parse_level(const std::string& level) {
  static const std::pair<const char*, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"off", spdlog::level::off},
  };
  for (const auto& [name, value] : kLevels) {
    if (level == name) return value;
  }
  OASR_THROW(kInvalidArgument, "unknown log level '", level,
             "'; use trace, debug, info, warn, error or off");
}
}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto made = spdlog::stderr_color_mt("oasr");
    made->set_pattern("[oasr %L] %v");
    made->set_level(parse_level(env::get_string("OASR_LOG_LEVEL", "warn")));
    return made;
  }();
  return *instance;
}

void set_level(const std::string& level) { logger().set_level(parse_level(level)); }

}  // namespace oasr::log
