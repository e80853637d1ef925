// libFuzzer target for the TCP address record a rank reads from the store for every peer
// (transport/tcp/mesh.h: parse_address). Beyond "no crash": an accepted record re-encodes to
// exactly the bytes it was parsed from (the parser is exact, so two readers cannot disagree).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "transport/tcp/mesh.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto a = weft::tcp::parse_address(text, 1);
  if (!a.ok()) return 0;
  auto again = weft::tcp::encode_address(a.value());
  if (!again.ok() || again.value() != text) std::abort();
  return 0;
}
