// Non-virtual helpers of the public Store interface.
#include "weft/store.h"

#include "rendezvous/store_common.h"

namespace weft {

Result<std::string> Store::get_string(std::string_view key, std::chrono::milliseconds timeout) {
  Result<Bytes> value = get(key, timeout);
  if (!value.ok()) return value.status();
  return std::string(value->begin(), value->end());
}

Result<std::vector<Bytes>> Store::multi_get(const std::vector<std::string>& keys,
                                            std::chrono::milliseconds timeout) {
  const auto deadline = deadline_after(clamp_timeout(timeout));
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    Result<Bytes> value = get(key, std::max(left, std::chrono::milliseconds(0)));
    if (!value.ok()) return value.status();
    values.push_back(std::move(value.value()));
  }
  return values;
}

}  // namespace weft
