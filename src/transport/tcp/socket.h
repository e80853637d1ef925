// Socket helpers for the TCP transport: listen/connect with deadlines, stream options, interface
// selection and host identity. All functions return Status values; none throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "weft/status.h"

namespace weft::tcp {

using Clock = std::chrono::steady_clock;

// Listens on bind_ip:port (port 0 = any free port). bind_ip "" means all addresses.
Result<Fd> listen_tcp(const std::string& bind_ip, uint16_t port);
Result<uint16_t> local_port(int fd);
// Connects, retrying refused connections (the peer may not listen yet) until the deadline.
Result<Fd> connect_tcp(const std::string& ip, uint16_t port, Clock::time_point deadline);
// Accepts one connection, waiting until the deadline.
Result<Fd> accept_tcp(int listen_fd, Clock::time_point deadline);
// Blocking-with-deadline transfers on a socket of either mode (used only during set-up).
Status write_all(int fd, const void* buf, size_t n, Clock::time_point deadline);
Status read_all(int fd, void* buf, size_t n, Clock::time_point deadline);
// TCP_NODELAY, SO_KEEPALIVE (with short probe intervals) and O_NONBLOCK.
Status set_stream_options(int fd);

// One IPv4 address of a network interface (getifaddrs).
struct InterfaceAddress {
  std::string name;  // "eth0"
  std::string ip;    // dotted quad
  bool up = true;
  bool loopback = false;
};
// The IPv4 address to publish for remote peers, chosen among `have` (in order). `spec` is an
// interface name ("eth0"), an IPv4 CIDR ("10.1.0.0/16") or empty: the first interface that is
// up, not loopback and not a container or virtual bridge (docker*, br-*, virbr*, veth*, cni*,
// flannel*, lxc*, cali*); 127.0.0.1 when there is none (enough for ranks of one machine; a
// remote peer refuses it, see is_loopback_ip). A spec that matches nothing is an error listing
// the interfaces.
Result<std::string> choose_interface_address(const std::string& spec,
                                             const std::vector<InterfaceAddress>& have);
// choose_interface_address over this machine's interfaces.
Result<std::string> select_interface_address(const std::string& spec);
// True for 127.0.0.0/8.
bool is_loopback_ip(const std::string& ip);
// Hostname plus the kernel boot id: equal only for processes on the same running kernel.
std::string default_host_id();

}  // namespace weft::tcp
