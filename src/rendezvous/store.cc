// Non-virtual helpers of the public Store interface.
#include "weft/store.h"

namespace weft {

Result<std::string> Store::get_string(std::string_view key, std::chrono::milliseconds timeout) {
  Result<Bytes> value = get(key, timeout);
  if (!value.ok()) return value.status();
  return std::string(value->begin(), value->end());
}

}  // namespace weft
