// libFuzzer target for the TCP store's request and reply parsers (src/rendezvous/
// tcp_store_protocol.h). Invariants checked beyond "no crash": a parsed request consumed no more
// than it was given and re-encodes to exactly the bytes it was parsed from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "rendezvous/tcp_store_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::tcp_store;  // NOLINT
  std::span<const uint8_t> in(data, size);
  size_t consumed = 0;
  auto request = decode_request(in, &consumed);
  if (request.ok() && request->has_value()) {
    if (consumed > size) std::abort();
    weft::Bytes again = encode_request(**request);
    if (again.size() != consumed || !std::equal(again.begin(), again.end(), data)) std::abort();
  }
  // The first byte picks the command whose reply the rest is parsed as.
  if (size > 0) {
    auto command = static_cast<Command>(1 + data[0] % 8);
    (void)decode_reply(command, in.subspan(1));
  }
  return 0;
}
