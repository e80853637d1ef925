#include "transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace weft::tcp {
namespace {

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1000)));
}

Result<sockaddr_in> make_addr(const std::string& ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (ip.empty() || ip == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    return Status(ErrorCode::invalid_argument, "'" + ip + "' is not an IPv4 address");
  }
  return addr;
}

bool is_virtual_bridge(const std::string& name) {
  static const std::array<const char*, 8> prefixes = {"docker", "br-",     "virbr", "veth",
                                                       "cni",    "flannel", "lxc",   "cali"};
  for (const char* p : prefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace

Result<Fd> listen_tcp(const std::string& bind_ip, uint16_t port) {
  auto addr = make_addr(bind_ip, port);
  if (!addr.ok()) return addr.status();
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno_status("socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr.value()), sizeof(sockaddr_in)) != 0) {
    return errno_status("bind " + bind_ip + ":" + std::to_string(port));
  }
  if (::listen(fd.get(), 1024) != 0) return errno_status("listen");
  return fd;
}

Result<uint16_t> local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return errno_status("getsockname");
  }
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

Result<Fd> connect_tcp(const std::string& ip, uint16_t port, Clock::time_point deadline) {
  auto addr = make_addr(ip, port);
  if (!addr.ok()) return addr.status();
  const std::string where = ip + ":" + std::to_string(port);
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return errno_status("socket");
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr.value()), sizeof(sockaddr_in));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      while (true) {
        int n = ::poll(&p, 1, ms_until(deadline));
        if (n > 0) break;
        if (n < 0 && errno != EINTR) return errno_status("poll(connect " + where + ")");
        if (Clock::now() >= deadline) {
          return Status(ErrorCode::timeout, "connecting to " + where + " timed out");
        }
      }
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      int flags = ::fcntl(fd.get(), F_GETFL);
      ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      return fd;
    }
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ECONNRESET) {
      return errno_status("connect " + where, err);
    }
    if (Clock::now() + backoff >= deadline) {
      return Status(ErrorCode::timeout, "connecting to " + where + " timed out (connection refused)");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

Result<Fd> accept_tcp(int listen_fd, Clock::time_point deadline) {
  while (true) {
    pollfd p{listen_fd, POLLIN, 0};
    int n = ::poll(&p, 1, ms_until(deadline));
    if (n > 0) {
      Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (fd.valid()) return fd;
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) return errno_status("accept");
    } else if (n < 0 && errno != EINTR) {
      return errno_status("poll(accept)");
    }
    if (Clock::now() >= deadline) return Status(ErrorCode::timeout, "waiting for peers to connect");
  }
}

Status write_all(int fd, const void* buf, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) return errno_status("send");
    pollfd pf{fd, POLLOUT, 0};
    ::poll(&pf, 1, ms_until(deadline));
    if (Clock::now() >= deadline) return Status(ErrorCode::timeout, "send timed out");
  }
  return Status();
}

Status read_all(int fd, void* buf, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Status(ErrorCode::peer_lost, "connection closed during set-up");
    if (errno != EAGAIN && errno != EINTR) return errno_status("recv");
    pollfd pf{fd, POLLIN, 0};
    ::poll(&pf, 1, ms_until(deadline));
    if (Clock::now() >= deadline) return Status(ErrorCode::timeout, "receive timed out");
  }
  return Status();
}

Status set_stream_options(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return errno_status("setsockopt(TCP_NODELAY)");
  }
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0) {
    return errno_status("setsockopt(SO_KEEPALIVE)");
  }
  int idle = 30, interval = 5, count = 4;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno_status("fcntl");
  return Status();
}

Result<std::string> choose_interface_address(const std::string& spec,
                                             const std::vector<InterfaceAddress>& have) {
  uint32_t net = 0, mask = 0;
  const auto slash = spec.find('/');
  const bool cidr = slash != std::string::npos;
  if (cidr) {
    in_addr a{};
    char* end = nullptr;
    const long bits = std::strtol(spec.c_str() + slash + 1, &end, 10);
    if (::inet_pton(AF_INET, spec.substr(0, slash).c_str(), &a) != 1 || end == spec.c_str() + slash + 1 ||
        *end != '\0' || bits < 0 || bits > 32) {
      return Status(ErrorCode::invalid_argument, "interface '" + spec + "' is not a valid IPv4 CIDR");
    }
    mask = bits == 0 ? 0 : htonl(~uint32_t{0} << (32 - bits));
    net = a.s_addr & mask;
  }
  std::string names;
  for (const InterfaceAddress& i : have) {
    in_addr addr{};
    if (!i.up || ::inet_pton(AF_INET, i.ip.c_str(), &addr) != 1) continue;
    names += (names.empty() ? "" : ", ") + i.name + "=" + i.ip;
    bool match = false;
    if (spec.empty()) {
      match = !i.loopback && !is_virtual_bridge(i.name);
    } else if (cidr) {
      match = (addr.s_addr & mask) == net;
    } else {
      match = i.name == spec;
    }
    if (match) return i.ip;
  }
  if (spec.empty()) return std::string("127.0.0.1");
  return Status(ErrorCode::invalid_argument,
                "no IPv4 interface matches '" + spec + "' (have: " + names + ")");
}

Result<std::string> select_interface_address(const std::string& spec) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return errno_status("getifaddrs");
  std::vector<InterfaceAddress> have;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    have.push_back({i->ifa_name, text, (i->ifa_flags & IFF_UP) != 0,
                    (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return choose_interface_address(spec, have);
}

bool is_loopback_ip(const std::string& ip) {
  in_addr a{};
  return ::inet_pton(AF_INET, ip.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

std::string default_host_id() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return std::string(host) + "/" + boot;
}

}  // namespace weft::tcp
