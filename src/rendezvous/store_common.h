// Helpers shared by every Store implementation: the integer format that add() keeps under a key,
// and the wording of keys and durations in error messages. Pure functions; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "weft/store.h"

namespace weft {

// add() keeps its counter as decimal ASCII text ("-12"), so a value written by add() reads back
// with get_string() and a value set to "41" can be incremented. `current` is the stored value, or
// null when the key does not exist (counts as 0). Writes the new value's text to *out.
// Errors: invalid_argument when the stored value is not a decimal int64 or the sum overflows.
Result<int64_t> add_to_value(std::string_view key, const Bytes* current, int64_t delta, Bytes* out);

// 'key' for messages: quoted, non-printable bytes as \xNN, cut after 120 characters.
std::string quote_key(std::string_view key);
// 'a', 'b', 'c' (and 7 more)
std::string quote_keys(const std::vector<std::string>& keys);
// "250 ms"
std::string format_ms(std::chrono::milliseconds ms);

// A non-negative timeout (negative ones mean "do not wait").
inline std::chrono::milliseconds clamp_timeout(std::chrono::milliseconds t) {
  return t.count() < 0 ? std::chrono::milliseconds(0) : t;
}

// The values the ranks in `ranks` published under key_of(rank), in that order, in one request to
// the store (Store::multi_get). When they do not all come within `timeout`, the error says which
// ranks had not published theirs.
Result<std::vector<std::string>> gather_records(Store& store, const std::vector<int>& ranks,
                                                const std::function<std::string(int)>& key_of,
                                                std::chrono::milliseconds timeout);

// Deadline now + timeout that cannot overflow the clock.
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

}  // namespace weft
