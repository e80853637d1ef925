#include "tools/bench/sizes.h"

#include <cctype>
#include <charconv>
#include <string>

namespace weft::bench {

Result<size_t> parse_size(std::string_view text) {
  auto bad = [&] {
    return Status(ErrorCode::invalid_argument,
                  "'" + std::string(text) + "' is not a size (examples: 8, 4K, 64M, 1G)");
  };
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return bad();
  std::string unit(end, text.data() + text.size());
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "IB")
    unit.resize(unit.size() - 2);
  else if (unit.size() >= 2 && unit.back() == 'B')
    unit.pop_back();
  else if (unit == "B")
    unit.clear();
  int shift = 0;
  if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (!unit.empty())
    return bad();
  if (shift > 0 && value > (SIZE_MAX >> shift)) return bad();
  return value << shift;
}

std::vector<size_t> size_sweep(size_t min, size_t max, size_t factor) {
  std::vector<size_t> sizes;
  for (size_t s = min; s <= max; s *= factor) {
    sizes.push_back(s);
    if (s == 0 || factor < 2 || s > max / factor) break;
  }
  return sizes;
}

}  // namespace weft::bench
