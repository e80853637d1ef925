#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace weft::log {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = std::make_shared<spdlog::logger>("weft",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("[weft %L %H:%M:%S.%e] %v");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return *instance;
}

bool set_level(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") return false;
  logger().set_level(lvl);
  return true;
}

}  // namespace weft::log
