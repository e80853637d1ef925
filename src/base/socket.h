// TCP socket helpers shared by the store (rendezvous/) and the TCP transport's set-up (tcp/):
// listen, connect and accept with deadlines, and whole-buffer send/receive with a deadline.
//
// Sockets come back non-blocking; the blocking helpers wait with poll(), so no call outlives its
// deadline. IPv4 and IPv6 (host names are resolved, literals in either family accepted). Errors
// are Status values naming the address and the system call; none throws. Any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/fd.h"
#include "weft/status.h"

namespace weft {

// "host:port", with brackets around IPv6 literals.
std::string host_port(const std::string& host, uint16_t port);
// The inverse: "host:port" or "[v6 address]:port" (a bare IPv6 literal is ambiguous and refused)
// with a port 1..65535. The error says what was wrong, without naming where the text came from.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
Result<HostPort> split_host_port(std::string_view text);

// A listening socket. host "" listens on every address (IPv6 dual-stack when the kernel has
// IPv6, else IPv4); "0.0.0.0" on every IPv4 address; anything else is resolved. Port 0: any free
// port (see local_port).
Result<Fd> listen_tcp(const std::string& host, uint16_t port);
// The local port a socket is bound to.
Result<uint16_t> local_port(int fd);
// "1.2.3.4:5678" of the peer, or "?" when unknown.
std::string peer_name(int fd);

// What connect_tcp does when every address refuses the connection.
enum class OnRefused {
  fail,   // return the error at once (the caller retries as it sees fit)
  retry,  // try again after a growing pause (5-200 ms) until the deadline: the peer may not
          // listen yet
};
// Connects to one of host's addresses before `deadline`. Returns a non-blocking socket with
// TCP_NODELAY.
Result<Fd> connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline,
                       OnRefused on_refused = OnRefused::fail);
// Accepts one connection on a listening socket before `deadline`.
Result<Fd> accept_tcp(int listen_fd, Clock::time_point deadline);

// Send or receive exactly n bytes before `deadline`, on a socket of either mode. timeout when it
// passes; peer_lost when the other side closed or reset the connection; io for other failures.
Status send_all(int fd, const void* data, size_t n, Clock::time_point deadline);
Status recv_all(int fd, void* data, size_t n, Clock::time_point deadline);

}  // namespace weft
