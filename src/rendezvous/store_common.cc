#include "rendezvous/store_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

namespace weft {

Result<std::vector<std::string>> gather_records(Store& store, const std::vector<int>& ranks,
                                                const std::function<std::string(int)>& key_of,
                                                std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  keys.reserve(ranks.size());
  for (int r : ranks) keys.push_back(key_of(r));
  Result<std::vector<Bytes>> values = store.multi_get(keys, timeout);
  if (!values.ok()) {
    // Name the ranks still missing (a look per key, only on this error path).
    std::vector<int> missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      Result<bool> there = store.check({keys[i]});
      if (there.ok() && !there.value()) missing.push_back(ranks[i]);
    }
    if (missing.empty()) return values.status();
    const size_t shown = std::min<size_t>(missing.size(), 16);
    return values.status().with_context(fmt::format(
        "nothing from rank{} {}{}", missing.size() == 1 ? "" : "s",
        fmt::join(missing.begin(), missing.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        missing.size() > shown ? fmt::format(" and {} more", missing.size() - shown) : ""));
  }
  std::vector<std::string> out;
  out.reserve(values->size());
  for (auto& v : values.value()) out.emplace_back(v.begin(), v.end());
  return out;
}

Result<int64_t> add_to_value(std::string_view key, const Bytes* current, int64_t delta,
                             Bytes* out) {
  int64_t value = 0;
  if (current != nullptr) {
    const char* first = reinterpret_cast<const char*>(current->data());
    const char* last = first + current->size();
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (current->empty() || ec != std::errc() || ptr != last) {
      return Status(
          ErrorCode::invalid_argument,
          fmt::format("add({}): the stored value is not a decimal integer", quote_key(key)));
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return Status(ErrorCode::invalid_argument, fmt::format("add({}, {}): {} + {} overflows int64",
                                                           quote_key(key), delta, value, delta));
  }
  std::string text = std::to_string(sum);
  out->assign(text.begin(), text.end());
  return sum;
}

std::string quote_key(std::string_view key) {
  constexpr size_t kShown = 120;
  std::string s = "'";
  for (size_t i = 0; i < key.size() && i < kShown; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      s += static_cast<char>(c);
    } else {
      s += fmt::format("\\x{:02x}", c);
    }
  }
  if (key.size() > kShown) s += fmt::format("...({} bytes)", key.size());
  s += "'";
  return s;
}

std::string quote_keys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 3;
  std::string s;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) s += ", ";
    s += quote_key(keys[i]);
  }
  if (keys.size() > kShown) s += fmt::format(" (and {} more)", keys.size() - kShown);
  return s;
}

std::string format_ms(std::chrono::milliseconds ms) { return fmt::format("{} ms", ms.count()); }

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  // A year is "forever" for a rendezvous and keeps time_point arithmetic far from overflow.
  constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);
  timeout = clamp_timeout(timeout);
  if (timeout > kForever) timeout = kForever;
  return Clock::now() + timeout;
}

}  // namespace weft
