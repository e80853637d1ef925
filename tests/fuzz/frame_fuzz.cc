// libFuzzer target: the TCP frame header decoder on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/tcp/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::tcp;
  uint8_t buf[kHeaderBytes] = {};
  std::memcpy(buf, data, size < kHeaderBytes ? size : kHeaderBytes);
  FrameLimits limits;
  limits.max_eager = 64 * 1024;
  auto h = decode_header(buf, limits);
  if (h.ok() && h->type == FrameType::hello && size >= kHeaderBytes + kHelloPayload) {
    (void)decode_hello(data + kHeaderBytes);
  }
  return 0;
}
