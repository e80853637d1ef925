// Socket helpers for the TCP store: listen, connect with a deadline, and whole-buffer send/recv
// with a deadline. Sockets are non-blocking; the blocking helpers wait with poll(), so a call can
// never outlive its deadline. Errors name the address and the system call. Any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/fd.h"
#include "weft/status.h"

namespace weft {

using SocketClock = std::chrono::steady_clock;

// "host:port", with brackets around IPv6 literals.
std::string host_port(const std::string& host, uint16_t port);

// A non-blocking listening socket. host "" listens on every address (IPv6 dual-stack when the
// kernel has IPv6, else IPv4); "0.0.0.0" on every IPv4 address; anything else is resolved.
Result<Fd> listen_tcp(const std::string& host, uint16_t port);
// The local port a socket is bound to.
Result<uint16_t> local_port(int fd);
// "1.2.3.4:5678" of the peer, or "?" when unknown.
std::string peer_name(int fd);

// One connection attempt to every resolved address of host, until one succeeds or `deadline`.
// Returns a non-blocking socket with TCP_NODELAY.
Result<Fd> connect_tcp(const std::string& host, uint16_t port, SocketClock::time_point deadline);

// Send or receive exactly n bytes before `deadline`. timeout when it passes; peer_lost when the
// other side closed; io for other failures.
Status send_all(int fd, const uint8_t* data, size_t n, SocketClock::time_point deadline);
Status recv_all(int fd, uint8_t* data, size_t n, SocketClock::time_point deadline);

}  // namespace weft
