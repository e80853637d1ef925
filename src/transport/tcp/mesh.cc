#include "transport/tcp/mesh.h"

#include <fmt/format.h>

#include <sys/socket.h>

#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/socket.h"
#include "rendezvous/store_common.h"
#include "transport/host_layout.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/socket.h"

namespace weft::tcp {
namespace {

struct PeerAddress {
  std::string host_id;
  std::string ip;
  uint16_t port = 0;
  std::string machine;  // default_host_id(): the real machine, whatever host_id says
};

const std::string& this_machine() {
  static const std::string m = default_host_id();
  return m;
}

std::string addr_key(int rank) { return "tcp/addr/" + std::to_string(rank); }

Result<PeerAddress> parse_address(const std::string& text, int rank) {
  std::istringstream in(text);
  PeerAddress a;
  std::string port;
  if (!std::getline(in, a.host_id) || !std::getline(in, a.ip) || !std::getline(in, port) ||
      !std::getline(in, a.machine)) {
    return Status(ErrorCode::protocol, fmt::format("malformed address record of rank {}", rank));
  }
  int p = std::atoi(port.c_str());
  if (p <= 0 || p > 65535) {
    return Status(ErrorCode::protocol, fmt::format("bad port '{}' published by rank {}", port, rank));
  }
  a.port = static_cast<uint16_t>(p);
  return a;
}

// A peer on another machine that could only publish a loopback address (it found no network
// interface to use) cannot be reached: say so instead of connecting to ourselves or timing out.
Status check_reachable(const MeshConfig& c, const PeerAddress& a, int peer) {
  if (a.host_id == c.host_id || a.machine == this_machine() || !is_loopback_ip(a.ip)) {
    return Status();
  }
  return Status(ErrorCode::invalid_argument,
                fmt::format("rank {}: rank {} is on another host ({}) but published the loopback "
                            "address {}: it found no network interface to use; set "
                            "WEFT_IFACE (an interface name or an IPv4 CIDR) on every rank",
                            c.rank, peer, a.machine, a.ip));
}

// Peers on the same host share one socket (several only add system calls over loopback); remote
// peers get Options::sockets_per_peer, over which large messages are striped.
int sockets_for(const MeshConfig& c, const std::string& peer_host) {
  return peer_host == c.host_id ? 1 : c.sockets_per_peer;
}

Status send_hello(int fd, const MeshConfig& c, int index, int count) {
  uint8_t buf[kHeaderBytes + kHelloPayload];
  FrameHeader h;
  h.type = FrameType::hello;
  h.comm = static_cast<uint32_t>(c.token);
  h.length = kHelloPayload;
  encode_header(h, buf);
  Hello hello{c.token, static_cast<uint32_t>(c.rank), static_cast<uint32_t>(c.size),
              static_cast<uint32_t>(index), static_cast<uint32_t>(count)};
  encode_hello(hello, buf + kHeaderBytes);
  return send_all(fd, buf, sizeof(buf), c.deadline);
}

// The address records of `peers`, in one request to the store.
Result<std::vector<std::string>> read_addresses(Store& store, const MeshConfig& c,
                                                const std::vector<int>& peers) {
  if (peers.empty()) return std::vector<std::string>();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      c.deadline - std::chrono::steady_clock::now());
  auto records =
      gather_records(store, peers, addr_key, std::max(left, std::chrono::milliseconds(1)));
  if (!records.ok()) {
    return records.status().with_context(fmt::format(
        "rank {}: waiting for the addresses of ranks {}-{}", c.rank, peers.front(), peers.back()));
  }
  return records;
}

// Accepts every connection from higher ranks and files it by (rank, index) from its HELLO.
Status accept_all(int listen_fd, Store& store, const MeshConfig& c,
                  std::vector<std::vector<Fd>>& sockets, int& same_host) {
  // Each higher rank opens sockets_for() sockets to this one; its record says which host it is on.
  size_t expected = 0;
  std::vector<int> above;
  for (int peer = c.rank + 1; peer < c.size; ++peer) above.push_back(peer);
  auto records = read_addresses(store, c, above);
  if (!records.ok()) return records.status();
  for (int peer = c.rank + 1; peer < c.size; ++peer) {
    auto addr = parse_address(records.value()[static_cast<size_t>(peer - c.rank - 1)], peer);
    if (!addr.ok()) return addr.status();
    WEFT_RETURN_IF_ERROR(check_reachable(c, addr.value(), peer));
    sockets[peer].resize(static_cast<size_t>(sockets_for(c, addr->host_id)));
    if (addr->host_id == c.host_id) ++same_host;
    expected += sockets[peer].size();
  }
  for (size_t got = 0; got < expected;) {
    auto fd = accept_tcp(listen_fd, c.deadline);
    if (!fd.ok()) {
      return Status(fd.status().code(), fmt::format("rank {}: {} ({} of {} connections from "
                                                    "higher ranks arrived)",
                                                    c.rank, fd.status().message(), got, expected));
    }
    uint8_t buf[kHeaderBytes + kHelloPayload];
    Status st = recv_all(fd->get(), buf, sizeof(buf), c.deadline);
    auto header = st.ok() ? decode_header(buf, FrameLimits{}) : Result<FrameHeader>(st);
    if (!header.ok() || header->type != FrameType::hello) {
      log::warn("rank {}: dropped a connection that did not start with a weft HELLO: {}", c.rank,
                header.ok() ? "wrong frame type" : header.status().to_string());
      continue;
    }
    Hello hello = decode_hello(buf + kHeaderBytes);
    if (hello.token != c.token) {
      log::warn("rank {}: dropped a connection from another job (token mismatch)", c.rank);
      continue;
    }
    if (hello.size != static_cast<uint32_t>(c.size) || hello.rank <= static_cast<uint32_t>(c.rank) ||
        hello.rank >= hello.size || hello.sockets_per_peer != sockets[hello.rank].size() ||
        hello.socket_index >= hello.sockets_per_peer ||
        sockets[hello.rank][hello.socket_index].valid()) {
      return Status(ErrorCode::protocol,
                    fmt::format("rank {}: inconsistent HELLO from rank {} (size {}, socket {}/{}); "
                                "do all ranks use the same options?",
                                c.rank, hello.rank, hello.size, hello.socket_index,
                                hello.sockets_per_peer));
    }
    sockets[hello.rank][hello.socket_index] = std::move(fd.value());
    ++got;
  }
  return Status();
}

}  // namespace

Result<Mesh> connect_mesh(Store& store, const MeshConfig& c) {
  Mesh mesh;
  std::vector<std::vector<Fd>>& sockets = mesh.sockets;
  sockets.resize(static_cast<size_t>(c.size));  // sized per peer once its host is known
  if (c.size == 1) return mesh;
  int same_host_above = 0, same_host_below = 0;

  auto ip = select_interface_address(c.interface);
  if (!ip.ok()) return ip.status();
  auto listener = listen_tcp(c.interface.empty() ? "" : ip.value(), 0);
  if (!listener.ok()) return listener.status();
  auto port = local_port(listener->get());
  if (!port.ok()) return port.status();
  WEFT_RETURN_IF_ERROR(store.set(addr_key(c.rank),
                                 fmt::format("{}\n{}\n{}\n{}", c.host_id, ip.value(),
                                             port.value(), this_machine())));
  log::debug("rank {}: listening on {}:{} (host {})", c.rank, ip.value(), port.value(), c.host_id);

  Status accept_status;
  std::thread acceptor(
      [&] { accept_status = accept_all(listener->get(), store, c, sockets, same_host_above); });

  Status connect_status;
  std::vector<int> below;
  for (int peer = 0; peer < c.rank; ++peer) below.push_back(peer);
  auto records = read_addresses(store, c, below);
  if (!records.ok()) connect_status = records.status();
  for (int peer = 0; peer < c.rank && connect_status.ok(); ++peer) {
    auto addr = parse_address(records.value()[static_cast<size_t>(peer)], peer);
    if (!addr.ok()) {
      connect_status = addr.status();
      break;
    }
    connect_status = check_reachable(c, addr.value(), peer);
    if (!connect_status.ok()) break;
    std::string target = addr->host_id == c.host_id ? "127.0.0.1" : addr->ip;
    const int count = sockets_for(c, addr->host_id);
    if (addr->host_id == c.host_id) ++same_host_below;
    sockets[peer].resize(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      auto fd = connect_tcp(target, addr->port, c.deadline, OnRefused::retry);
      if (!fd.ok()) {
        connect_status = fd.status().with_context(
            fmt::format("rank {}: connecting to rank {}", c.rank, peer));
        break;
      }
      connect_status = send_hello(fd->get(), c, i, count);
      if (!connect_status.ok()) break;
      sockets[peer][i] = std::move(fd.value());
    }
  }
  // A failed connect would leave the acceptor waiting for the deadline: wake it up.
  if (!connect_status.ok()) ::shutdown(listener->get(), SHUT_RDWR);
  acceptor.join();
  WEFT_RETURN_IF_ERROR(connect_status);
  WEFT_RETURN_IF_ERROR(accept_status);
  for (auto& per_peer : sockets) {
    for (auto& fd : per_peer) WEFT_RETURN_IF_ERROR(set_stream_options(fd.get()));
  }
  mesh.local_ranks = 1 + same_host_above + same_host_below;
  return mesh;
}

}  // namespace weft::tcp
