// TCP store wire protocol: length-prefixed binary frames, one request then one reply, in order.
//
// The grammar is in docs/rendezvous.md. All integers are little-endian. This header holds the
// limits, the parsed forms and pure encode/decode functions; nothing here touches a socket, so the
// decoders can be unit-tested and fuzzed. Decoders treat every byte as hostile: lengths are
// checked against the limits before anything is allocated, unknown commands and trailing bytes
// are rejected, and an error means "close this connection", never a crash.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/status.h"
#include "weft/store.h"

namespace weft::tcp_store {

inline constexpr uint32_t kMagic = 0x52545357;  // "WSTR" on the wire (the transport uses "WEFT")
// Version 2: the ping carries nonces and the server says whether it authenticates; after it, an
// authenticating server takes and sends every frame inside a record (tcp_store_auth.h).
inline constexpr uint32_t kVersion = 2;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMaxKeyBytes = 4096;
// Store values are addresses and small records: 1 MiB bounds what one frame (and so one
// connection's input, and one reply) can make the server hold.
inline constexpr size_t kMaxValueBytes = size_t{1} << 20;
inline constexpr size_t kMaxKeysPerRequest = 65536;
inline constexpr size_t kMaxMessageBytes = 4096;  // text of an error reply
inline constexpr size_t kLengthBytes = 4;         // the frame's length prefix
// Largest payload (bytes after the length prefix) of any valid frame: a set of a maximal key and
// value. Keeps a hostile length from making the reader buffer more than this.
inline constexpr size_t kMaxPayloadBytes = 1 + 4 + kMaxKeyBytes + 4 + kMaxValueBytes;
// The server caps waiting timeouts here (a week), so deadlines cannot overflow.
inline constexpr uint64_t kMaxTimeoutMs = uint64_t{7} * 24 * 3600 * 1000;

enum class Command : uint8_t {
  ping = 1,
  set = 2,
  get = 3,
  add = 4,
  wait = 5,
  check = 6,
  erase = 7,
  multi_get = 8
};
const char* to_string(Command c);

struct Request {
  Command command = Command::ping;
  uint32_t magic = kMagic;        // ping
  uint32_t version = kVersion;    // ping
  std::array<uint8_t, kNonceBytes> nonce{};  // ping, version >= 2: the client's nonce
  std::string key;                // set, get, add, erase
  Bytes value;                    // set
  int64_t delta = 0;              // add
  std::vector<std::string> keys;  // wait, check, multi_get
  uint64_t timeout_ms = 0;        // get, wait, multi_get
};

enum class ReplyCode : uint8_t { ok = 0, timeout = 1, error = 2 };

struct Reply {
  ReplyCode code = ReplyCode::ok;
  Bytes value;                      // ok reply to get
  std::vector<Bytes> values;        // ok reply to multi_get, in the order of the request's keys
  int64_t integer = 0;              // ok reply to add (new value) and ping (server version)
  bool auth = false;                // ok reply to ping (version >= 2): requests must be records
  std::array<uint8_t, kNonceBytes> nonce{};  // ok reply to ping (version >= 2): server's nonce
  bool flag = false;                // ok reply to check
  ErrorCode error = ErrorCode::ok;  // error reply
  std::string message;              // error reply

  static Reply ok() { return {}; }
  static Reply timed_out() {
    Reply r;
    r.code = ReplyCode::timeout;
    return r;
  }
  static Reply failure(ErrorCode error, std::string message);
};

// Argument checks shared by client and decoder: invalid_argument naming the limit.
Status check_key(std::string_view key);
Status check_value_size(size_t size);
Status check_key_count(size_t count);

// Whole frames (length prefix included). The request must pass the checks above.
Bytes encode_request(const Request& request);
Bytes encode_reply(Command command, const Reply& reply);

// Looks at the bytes received so far. Returns:
//  - nullopt when they are a prefix of a frame that may still become valid (read more);
//  - the first request when a whole frame is there, with *consumed set to its size;
//  - a protocol error when no continuation can make a valid frame.
Result<std::optional<Request>> decode_request(std::span<const uint8_t> buffer, size_t* consumed);

// Reads a frame's length prefix (exactly kLengthBytes bytes); protocol error if 0 or too large.
Result<size_t> decode_length(std::span<const uint8_t> prefix);
// Parses a reply payload (the bytes after the length prefix) to a request of `command`.
Result<Reply> decode_reply(Command command, std::span<const uint8_t> payload);

}  // namespace weft::tcp_store
