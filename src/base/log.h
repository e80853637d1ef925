// Logging for the whole library: one spdlog logger named "weft", level set once from Options.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

namespace weft::log {

spdlog::logger& logger();
// trace, debug, info, warn, error, off. Returns false for an unknown name.
bool set_level(std::string_view level);

// Text from another process (a peer's error message) made safe to log and to show: control
// characters and bytes above 0x7e become \xNN, so no escape sequence reaches a terminal and a
// message stays on one line.
std::string printable(std::string_view text);

template <typename... Args>
void debug(spdlog::format_string_t<Args...> f, Args&&... args) {
  logger().debug(f, std::forward<Args>(args)...);
}
template <typename... Args>
void info(spdlog::format_string_t<Args...> f, Args&&... args) {
  logger().info(f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(spdlog::format_string_t<Args...> f, Args&&... args) {
  logger().warn(f, std::forward<Args>(args)...);
}
template <typename... Args>
void error(spdlog::format_string_t<Args...> f, Args&&... args) {
  logger().error(f, std::forward<Args>(args)...);
}

}  // namespace weft::log
