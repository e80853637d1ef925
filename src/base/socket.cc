#include "base/socket.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <charconv>
#include <cstring>
#include <thread>

namespace weft {
namespace {

constexpr int kBacklog = 1024;

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Result<Fd> bind_listen(const sockaddr* addr, socklen_t len, bool dual_stack,
                       const std::string& where) {
  Fd fd(::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno_status("socket for " + where);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (dual_stack) {
    int zero = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (::bind(fd.get(), addr, len) != 0) return errno_status("bind " + where);
  if (::listen(fd.get(), kBacklog) != 0) return errno_status("listen on " + where);
  return fd;
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

Status resolve(const std::string& host, uint16_t port, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out->list);
  if (rc != 0) {
    return Status(ErrorCode::io,
                  fmt::format("cannot resolve '{}': {}", host,
                              rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc)));
  }
  return Status::success();
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 1000000 ? 1000000 : static_cast<int>(left.count());
}

// Waits until fd is ready for `events`; timeout status when the deadline passes first.
Status wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = remaining_ms(deadline);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return Status::success();  // errors and hang-ups surface in the next call
    if (rc == 0 && ms == 0) return Status(ErrorCode::timeout, "timed out");
    if (rc < 0 && errno != EINTR) return errno_status("poll");
  }
}

// One non-blocking connection attempt to `a`; the errno of the failure in *err (0: connected).
Result<Fd> connect_once(const addrinfo& a, const std::string& where, Clock::time_point deadline,
                        int* err) {
  *err = 0;
  Fd fd(::socket(a.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno_status("socket for " + where);
  if (::connect(fd.get(), a.ai_addr, a.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      return errno_status("connect " + where);
    }
    Status ready = wait_ready(fd.get(), POLLOUT, deadline);
    if (!ready.ok()) return Status(ErrorCode::timeout, "connecting to " + where + " timed out");
    socklen_t len = sizeof(*err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, err, &len);
    if (*err != 0) return errno_status("connect " + where, *err);
  }
  set_nodelay(fd.get());
  return fd;
}

bool refused(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN || err == ECONNRESET;
}

}  // namespace

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<HostPort> split_host_port(std::string_view text) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    if (const size_t close = text.find("]:"); close != std::string_view::npos) {
      host = text.substr(1, close - 1);
      port = text.substr(close + 2);
    }
  } else if (const size_t colon = text.rfind(':');
             colon != std::string_view::npos && text.find(':') == colon) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || port.empty()) {
    return Status(ErrorCode::invalid_argument,
                  "is not host:port (use [addr]:port for IPv6)");
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("has a bad port \"{}\" (1-65535)", port));
  }
  return HostPort{std::string(host), static_cast<uint16_t>(value)};
}

Result<Fd> listen_tcp(const std::string& host, uint16_t port) {
  const std::string where = host_port(host.empty() ? "*" : host, port);
  if (host.empty()) {
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons(port);
    Result<Fd> fd = bind_listen(reinterpret_cast<sockaddr*>(&a6), sizeof(a6), true, where);
    if (fd.ok()) return fd;
    // No IPv6 here (or it is disabled): fall through to IPv4.
  }
  if (host.empty() || host == "0.0.0.0") {
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons(port);
    return bind_listen(reinterpret_cast<sockaddr*>(&a4), sizeof(a4), false, where);
  }
  AddrInfo ai;
  WEFT_RETURN_IF_ERROR(resolve(host, port, true, &ai));
  Status last(ErrorCode::io, "no address for " + where);
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    Result<Fd> fd = bind_listen(a->ai_addr, a->ai_addrlen, false, where);
    if (fd.ok()) return fd;
    last = fd.status();
  }
  return last;
}

Result<uint16_t> local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return errno_status("getsockname");
  }
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    return host_port(buf, ntohs(a->sin6_port));
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&ss);
  ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
  return host_port(buf, ntohs(a->sin_port));
}

Result<Fd> connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline,
                       OnRefused on_refused) {
  const std::string where = host_port(host, port);
  AddrInfo ai;
  WEFT_RETURN_IF_ERROR(resolve(host, port, false, &ai));
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    Status last(ErrorCode::io, "no address for " + where);
    bool all_refused = true;
    for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
      int err = 0;
      Result<Fd> fd = connect_once(*a, where, deadline, &err);
      if (fd.ok()) return fd;
      last = fd.status();
      all_refused = all_refused && refused(err);
    }
    if (on_refused == OnRefused::fail || !all_refused) return last;
    if (Clock::now() + pause >= deadline) {
      return Status(ErrorCode::timeout,
                    fmt::format("connecting to {} timed out ({})", where, last.message()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

Result<Fd> accept_tcp(int listen_fd, Clock::time_point deadline) {
  for (;;) {
    Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) return fd;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return errno_status("accept");
    }
    Status ready = wait_ready(listen_fd, POLLIN, deadline);
    if (!ready.ok()) {
      return ready.code() == ErrorCode::timeout
                 ? Status(ErrorCode::timeout, "waiting for peers to connect")
                 : ready;
    }
  }
}

Status send_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      WEFT_RETURN_IF_ERROR(wait_ready(fd, POLLOUT, deadline));
    } else if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return Status(ErrorCode::peer_lost,
                    std::string("connection closed: ") + std::strerror(errno));
    } else if (k < 0 && errno != EINTR) {
      return errno_status("send");
    }
  }
  return Status::success();
}

Status recv_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
    } else if (k == 0) {
      return Status(ErrorCode::peer_lost, "connection closed by the other side");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      WEFT_RETURN_IF_ERROR(wait_ready(fd, POLLIN, deadline));
    } else if (errno == ECONNRESET) {
      return Status(ErrorCode::peer_lost, "connection reset by the other side");
    } else if (errno != EINTR) {
      return errno_status("recv");
    }
  }
  return Status::success();
}

}  // namespace weft
