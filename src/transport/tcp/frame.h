// The TCP transport's frame header: encoding and the hostile-input decoder.
//
// Every frame is a fixed 72-byte little-endian header followed by `length` payload bytes. The
// grammar and the meaning of each field are in docs/wire-format.md; bump kWireVersion on any
// change. decode_header() accepts any 72 bytes and either returns a header whose fields are all in
// range or an ErrorCode::protocol status: it never trusts a length it has not bounded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/transport.h"
#include "weft/status.h"

namespace weft::tcp {

inline constexpr uint32_t kMagic = 0x54464557;  // "WEFT" in little-endian byte order
inline constexpr uint8_t kWireVersion = 2;
inline constexpr size_t kHeaderBytes = 72;
// Secured links: a frame whose payload is 1 to kInlinePayloadMax bytes travels as one record,
// header || payload (one seal and one open per small message instead of two); a larger payload
// follows its header record as a record of its own, opened in place in the destination.
inline constexpr size_t kInlinePayloadMax = 4096;
inline constexpr bool payload_inline(uint64_t length) {
  return length > 0 && length <= kInlinePayloadMax;
}
inline constexpr size_t kMaxErrorText = 4096;
inline constexpr size_t kHelloPayload = 24;

enum class FrameType : uint8_t {
  hello = 1,    // first frame on every socket: token, rank, socket index, world size
  eager = 2,    // a whole message in the payload
  rts = 3,      // request to send: a large message of `offset` total bytes waits for a CTS
  cts = 4,      // clear to send msg_id: the receiver has posted the buffer
  data = 5,     // `length` bytes of message msg_id at byte `offset`
  credit = 6,   // the receiver consumed `msg_id` eager bytes; the sender may send that many more
  error = 7,    // the sender failed; payload is the error text, `offset` the ErrorCode
  goodbye = 8,  // clean shutdown: no more frames follow on this socket
  heartbeat = 9,  // "still here": sent on an idle link every peer_timeout/5 (no payload)
};

struct FrameHeader {
  FrameType type = FrameType::eager;
  uint32_t comm = 0;  // low 32 bits of the communicator token
  uint64_t tag = 0;
  uint64_t length = 0;
  uint64_t msg_id = 0;
  uint64_t offset = 0;
  Fingerprint fp;
};

// Limits the decoder enforces on lengths.
struct FrameLimits {
  uint64_t max_eager = 0;  // largest eager payload accepted
  uint64_t max_message = uint64_t{1} << 48;
};

void encode_header(const FrameHeader& h, uint8_t out[kHeaderBytes]);
Result<FrameHeader> decode_header(const uint8_t in[kHeaderBytes], const FrameLimits& limits);

// The HELLO payload.
struct Hello {
  uint64_t token = 0;
  uint32_t rank = 0;
  uint32_t size = 0;
  uint32_t socket_index = 0;
  uint32_t sockets_per_peer = 0;
};
void encode_hello(const Hello& h, uint8_t out[kHelloPayload]);
Hello decode_hello(const uint8_t in[kHelloPayload]);

}  // namespace weft::tcp
