// Logging through spdlog. The level comes from OASR_LOG_LEVEL (core/env) or
// set_log_level(); the logger writes to stderr so stdout stays for results.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace oasr::log {

// The library's logger (created on first use, level from OASR_LOG_LEVEL).
spdlog::logger& logger();
void set_level(const std::string& level);  // throws oasr::Error on an unknown name

template <typename... Args>
void info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().debug(fmt, std::forward<Args>(args)...);
}

}  // namespace oasr::log
