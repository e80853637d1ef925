// Speaking (or mangling) the TCP store protocol by hand over a raw socket, for the store tests
// (store_test.cc, store_security_test.cc). Every wait is bounded by kRawWait.
#pragma once

#include <chrono>
#include <cstdint>

#include "base/fd.h"
#include "base/socket.h"
#include "rendezvous/tcp_store_protocol.h"
#include "weft/status.h"

namespace weft::test {

inline constexpr std::chrono::milliseconds kRawWait(30000);

// A raw connection to a server on loopback.
inline Fd raw_connect(uint16_t port) {
  Result<Fd> fd = connect_tcp("127.0.0.1", port, Clock::now() + kRawWait);
  return fd.ok() ? std::move(fd.value()) : Fd();
}

// True when the server closes the connection (recv sees EOF or a reset) before the deadline;
// whatever it sends first is read and dropped.
inline bool server_closes(const Fd& fd) {
  uint8_t buf[256];
  auto deadline = Clock::now() + kRawWait;
  for (;;) {
    Status s = recv_all(fd.get(), buf, 1, deadline);
    if (s.code() == ErrorCode::peer_lost) return true;
    if (!s.ok()) return false;  // timeout or other error
  }
}

// Reads one reply frame to `command`.
inline Result<tcp_store::Reply> raw_reply(const Fd& fd, tcp_store::Command command) {
  uint8_t prefix[tcp_store::kLengthBytes];
  WEFT_RETURN_IF_ERROR(recv_all(fd.get(), prefix, sizeof(prefix), Clock::now() + kRawWait));
  Result<size_t> n = tcp_store::decode_length(prefix);
  if (!n.ok()) return n.status();
  Bytes payload(n.value());
  WEFT_RETURN_IF_ERROR(
      recv_all(fd.get(), payload.data(), payload.size(), Clock::now() + kRawWait));
  return tcp_store::decode_reply(command, payload);
}

inline Status raw_send(const Fd& fd, const Bytes& b) {
  return send_all(fd.get(), b.data(), b.size(), Clock::now() + kRawWait);
}

}  // namespace weft::test
