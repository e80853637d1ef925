// Socket helpers of the TCP transport: stream options and the choice of the interface to publish
// (listen/connect/accept are base/socket.h's). All functions return Status values; none throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "weft/status.h"

namespace weft::tcp {

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

}  // namespace weft::tcp
