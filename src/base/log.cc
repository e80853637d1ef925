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

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace weft::log
