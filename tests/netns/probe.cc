#include "netns/probe.h"

#include <thread>
#include <vector>

#include "base/socket.h"

namespace weft::test::netns {
namespace {

using namespace std::chrono_literals;

Result<Fd> listen_in(const Network& net, const std::string& host, const std::string& address) {
  InNamespace in(net, host);
  if (!in.ok()) return Status(ErrorCode::io, "cannot enter the namespace of " + host);
  return listen_tcp(address, 0);
}

Result<Fd> connect_from(const Network& net, const std::string& host, const std::string& address,
                        uint16_t port, Clock::time_point deadline) {
  InNamespace in(net, host);
  if (!in.ok()) return Status(ErrorCode::io, "cannot enter the namespace of " + host);
  return connect_tcp(address, port, deadline);
}

}  // namespace

bool reaches(const Network& net, const std::string& from, const std::string& to,
             const std::string& address, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Result<Fd> listener = listen_in(net, to, address);
  if (!listener.ok()) return false;
  Result<uint16_t> port = local_port(listener.value().get());
  if (!port.ok()) return false;
  Result<Fd> conn = connect_from(net, from, address, port.value(), deadline);
  return conn.ok() && accept_tcp(listener.value().get(), deadline).ok();
}

std::optional<double> goodput_mbit(const Network& net, const std::string& from,
                                   const std::string& to, size_t bytes) {
  if (bytes < 2) return std::nullopt;
  const auto deadline = Clock::now() + 60s;
  Result<Fd> listener = listen_in(net, to, net.address(to));
  if (!listener.ok()) return std::nullopt;
  Result<uint16_t> port = local_port(listener.value().get());
  if (!port.ok()) return std::nullopt;
  // Both ends first (the kernel completes the handshake before accept), so nothing below can
  // wait for a peer that never came.
  Result<Fd> sender = connect_from(net, from, net.address(to), port.value(), deadline);
  if (!sender.ok()) return std::nullopt;
  Result<Fd> receiver = accept_tcp(listener.value().get(), deadline);
  if (!receiver.ok()) return std::nullopt;
  std::thread send([&] {
    const std::vector<char> data(bytes, 'x');
    (void)send_all(sender.value().get(), data.data(), data.size(), deadline);
  });
  std::vector<char> buf(bytes);
  std::optional<double> mbit;
  if (recv_all(receiver.value().get(), buf.data(), 1, deadline).ok()) {
    const auto first = Clock::now();
    if (recv_all(receiver.value().get(), buf.data() + 1, bytes - 1, deadline).ok()) {
      const std::chrono::duration<double> took = Clock::now() - first;
      mbit = static_cast<double>(bytes - 1) * 8 / took.count() / 1e6;
    }
  }
  receiver.value().reset();  // a sender still blocked gets its error now
  send.join();
  return mbit;
}

}  // namespace weft::test::netns
