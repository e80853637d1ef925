#include "transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace weft::tcp {
namespace {

bool is_virtual_bridge(const std::string& name) {
  static const std::array<const char*, 8> prefixes = {"docker", "br-",     "virbr", "veth",
                                                       "cni",    "flannel", "lxc",   "cali"};
  for (const char* p : prefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace

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

}  // namespace weft::tcp
