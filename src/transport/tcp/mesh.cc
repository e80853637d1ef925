#include "transport/tcp/mesh.h"

#include <fmt/format.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/socket.h"
#include "rendezvous/store_common.h"
#include "transport/host_layout.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/secure_setup.h"
#include "transport/tcp/socket.h"

namespace weft::tcp {
namespace {

const std::string& this_machine() {
  static const std::string m = default_host_id();
  return m;
}

std::string addr_key(int rank) { return "tcp/addr/" + std::to_string(rank); }

// Both ends of a link must run the same security: a peer's record says whether it does.
Status check_security(const MeshConfig& c, const PeerAddress& a, int peer) {
  const bool secure = c.security != security::SecurityMode::off;
  if (secure == a.static_key.has_value()) return Status();
  return Status(ErrorCode::invalid_argument,
                fmt::format("rank {} runs with security={} but rank {} {}: every rank of a job "
                            "needs the same security setting and job key",
                            c.rank, security::to_string(c.security), peer,
                            secure ? "published no static key (it runs without security)"
                                   : "published a static key (it runs with security)"));
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

// One incoming connection while it identifies itself.
struct Incoming {
  Fd fd;
  std::string address;  // the stranger's ip:port, for the log
  std::chrono::steady_clock::time_point deadline;
  std::vector<uint8_t> buf;  // what is needed next, filled up to its size
  size_t have = 0;
  bool confirming = false;  // secured: waiting for the confirmation record
  Hello hello;
  std::optional<SecureResponder> responder;
};

// What one step of an incoming connection led to.
struct Step {
  enum Kind { more, filed, drop, fatal } kind = more;
  Status status;  // drop: why (logged); fatal: the job's error
};

class Acceptor {
 public:
  Acceptor(int listen_fd, const MeshConfig& c, const LocalSecurity* security,
           std::vector<std::vector<Fd>>& sockets, std::vector<std::vector<LinkCrypto>>& crypto,
           std::vector<std::optional<StaticKeyRecord>>& keys)
      : listen_fd_(listen_fd), c_(c), security_(security), sockets_(sockets), crypto_(crypto),
        keys_(keys) {}

  // Until every expected socket is filed or the deadline passes; waits in poll().
  Status run(size_t expected) {
    size_t got = 0;
    std::vector<pollfd> fds;
    while (got < expected) {
      const auto now = std::chrono::steady_clock::now();
      auto wake = c_.deadline;
      for (size_t i = 0; i < incoming_.size();) {
        if (now >= incoming_[i].deadline) {
          drop(i, Status(ErrorCode::timeout, "it did not identify itself in time"));
          continue;
        }
        wake = std::min(wake, incoming_[i].deadline);
        ++i;
      }
      if (now >= c_.deadline) return timed_out(got, expected);
      fds.clear();
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const Incoming& in : incoming_) fds.push_back({in.fd.get(), POLLIN, 0});
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
      int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(ms + 1, 1, 1000)));
      if (n < 0 && errno != EINTR) return errno_status("poll");
      if (n <= 0) continue;
      // Newest last: step the existing ones (by their poll slot) before accepting more.
      for (size_t i = fds.size() - 1; i >= 1; --i) {
        if (fds[i].revents == 0) continue;
        Step step = advance(incoming_[i - 1]);
        if (step.kind == Step::fatal) return step.status;
        if (step.kind == Step::drop) drop(i - 1, step.status);
        if (step.kind == Step::filed) {
          ++got;
          incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i - 1));
        }
      }
      if (fds[0].revents != 0) WEFT_RETURN_IF_ERROR(accept_ready());
    }
    for (Incoming& in : incoming_) {
      log::debug("rank {}: set-up done, closing the unidentified connection from {}", c_.rank,
                 in.address);
    }
    return Status();
  }

 private:
  static constexpr size_t kMaxIncoming = 256;  // connections identifying themselves at once

  Status accept_ready() {
    for (;;) {
      Fd fd(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd.valid()) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
          return Status();
        }
        return errno_status("accept");
      }
      Incoming in;
      in.address = peer_name(fd.get());
      in.fd = std::move(fd);
      in.deadline = std::min(c_.deadline, std::chrono::steady_clock::now() + c_.stranger_timeout);
      in.buf.resize(security_ != nullptr ? kSecureHelloBytes : kHeaderBytes + kHelloPayload);
      if (incoming_.size() >= kMaxIncoming) {
        incoming_.push_back(std::move(in));
        drop(incoming_.size() - 1, Status(ErrorCode::protocol, "too many connections at once"));
        continue;
      }
      incoming_.push_back(std::move(in));
    }
  }

  void drop(size_t i, const Status& why) {
    ++dropped_;
    last_drop_ = fmt::format("{}: {}", incoming_[i].address, why.message());
    log::warn("rank {}: dropped a connection from {} during set-up: {}", c_.rank,
              incoming_[i].address, why.message());
    incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  Status timed_out(size_t got, size_t expected) const {
    std::string missing;
    for (int peer = c_.rank + 1; peer < c_.size; ++peer) {
      for (size_t i = 0; i < sockets_[peer].size(); ++i) {
        if (sockets_[peer][i].valid()) continue;
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peer);
        break;
      }
    }
    std::string strangers =
        dropped_ == 0 ? ""
                      : fmt::format("; {} other connection(s) dropped, the last from {}", dropped_,
                                    last_drop_);
    return Status(ErrorCode::timeout,
                  fmt::format("rank {}: waiting for peers to connect ({} of {} connections from "
                              "higher ranks arrived; missing: rank(s) {}){}",
                              c_.rank, got, expected, missing, strangers));
  }

  // Reads what the connection's current step needs; processes it once complete.
  Step advance(Incoming& in) {
    while (in.have < in.buf.size()) {
      ssize_t r = ::recv(in.fd.get(), in.buf.data() + in.have, in.buf.size() - in.have,
                         MSG_DONTWAIT);
      if (r > 0) {
        in.have += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {};
      if (r < 0 && errno == EINTR) continue;
      return {Step::drop, Status(ErrorCode::peer_lost,
                                 r == 0 ? "it closed the connection"
                                        : fmt::format("recv: {}", std::strerror(errno)))};
    }
    if (security_ == nullptr) return clear_hello(in);
    return in.confirming ? confirm(in) : secure_hello(in);
  }

  // The HELLO's claims against this job; `fatal_on_mismatch`: a clear HELLO with the job's
  // token comes from a rank of this job, so disagreeing options fail the job.
  Step check_hello(const Hello& hello, const Incoming& in, bool fatal_on_mismatch) const {
    if (hello.token != c_.token) {
      return {Step::drop, Status(ErrorCode::protocol, "another job (token mismatch)")};
    }
    if (hello.size != static_cast<uint32_t>(c_.size) ||
        hello.rank <= static_cast<uint32_t>(c_.rank) || hello.rank >= hello.size ||
        hello.sockets_per_peer != sockets_[hello.rank].size() ||
        hello.socket_index >= hello.sockets_per_peer) {
      Status st(ErrorCode::protocol,
                fmt::format("rank {}: inconsistent HELLO from rank {} at {} (size {}, socket "
                            "{}/{}); do all ranks use the same options?",
                            c_.rank, hello.rank, in.address, hello.size, hello.socket_index,
                            hello.sockets_per_peer));
      return {fatal_on_mismatch ? Step::fatal : Step::drop, st};
    }
    if (sockets_[hello.rank][hello.socket_index].valid()) {
      return {Step::drop, Status(ErrorCode::protocol,
                                 fmt::format("a second connection claiming rank {} socket {}",
                                             hello.rank, hello.socket_index))};
    }
    return {};
  }

  Step clear_hello(Incoming& in) {
    auto header = decode_header(in.buf.data(), FrameLimits{});
    if (!header.ok()) return {Step::drop, header.status()};
    if (header->type != FrameType::hello || header->length != kHelloPayload) {
      return {Step::drop, Status(ErrorCode::protocol, "it did not start with a weft HELLO")};
    }
    Hello hello = decode_hello(in.buf.data() + kHeaderBytes);
    Step step = check_hello(hello, in, true);
    if (step.kind != Step::more) return step;
    sockets_[hello.rank][hello.socket_index] = std::move(in.fd);
    return {Step::filed, Status()};
  }

  Step secure_hello(Incoming& in) {
    SecureResponder::Opened opened;
    auto responder = SecureResponder::create(
        *security_, c_.token, std::span<const uint8_t, kSecureHelloBytes>(in.buf.data(),
                                                                         kSecureHelloBytes),
        opened);
    if (!responder.ok()) return {Step::drop, responder.status()};
    Step step = check_hello(opened.hello, in, false);
    if (step.kind != Step::more) return step;
    const auto& known = keys_[opened.hello.rank];
    if (!known || known->key != opened.initiator_key) {
      return {Step::drop,
              Status(ErrorCode::protocol,
                     fmt::format("it claims rank {}, whose store record names another static key",
                                 opened.hello.rank))};
    }
    // Message 2 is small and the socket fresh: its send buffer takes it at once.
    Status sent = send_all(in.fd.get(), opened.answer.data(), opened.answer.size(), in.deadline);
    if (!sent.ok()) return {Step::drop, sent};
    in.hello = opened.hello;
    in.responder.emplace(std::move(responder.value()));
    in.confirming = true;
    in.buf.assign(kConfirmBytes, 0);
    in.have = 0;
    return advance(in);  // the confirmation may already be there
  }

  Step confirm(Incoming& in) {
    const Hello& hello = in.hello;
    LinkCrypto crypto;
    Status st = in.responder->confirm(
        std::span<uint8_t, kConfirmBytes>(in.buf.data(), kConfirmBytes),
        static_cast<int>(hello.rank), crypto);
    if (!st.ok()) return {Step::drop, st};
    if (sockets_[hello.rank][hello.socket_index].valid()) {
      return {Step::drop, Status(ErrorCode::protocol, "a second confirmed connection")};
    }
    sockets_[hello.rank][hello.socket_index] = std::move(in.fd);
    crypto_[hello.rank][hello.socket_index] = std::move(crypto);
    return {Step::filed, Status()};
  }

  const int listen_fd_;
  const MeshConfig& c_;
  const LocalSecurity* security_;  // null: security off
  std::vector<std::vector<Fd>>& sockets_;
  std::vector<std::vector<LinkCrypto>>& crypto_;
  std::vector<std::optional<StaticKeyRecord>>& keys_;
  std::vector<Incoming> incoming_;
  size_t dropped_ = 0;
  std::string last_drop_;
};

// Accepts every connection from higher ranks and files it by (rank, index) from its HELLO.
Status accept_all(int listen_fd, Store& store, const MeshConfig& c, const LocalSecurity* security,
                  Mesh& mesh, int& same_host) {
  // Each higher rank opens sockets_for() sockets to this one; its record says which host it is on.
  size_t expected = 0;
  std::vector<int> above;
  for (int peer = c.rank + 1; peer < c.size; ++peer) above.push_back(peer);
  auto records = read_addresses(store, c, above);
  if (!records.ok()) return records.status();
  std::vector<std::optional<StaticKeyRecord>> keys(static_cast<size_t>(c.size));
  for (int peer = c.rank + 1; peer < c.size; ++peer) {
    auto addr = parse_address(records.value()[static_cast<size_t>(peer - c.rank - 1)], peer);
    if (!addr.ok()) return addr.status();
    WEFT_RETURN_IF_ERROR(check_reachable(c, addr.value(), peer));
    WEFT_RETURN_IF_ERROR(check_security(c, addr.value(), peer));
    keys[peer] = addr->static_key;
    mesh.sockets[peer].resize(static_cast<size_t>(sockets_for(c, addr->host_id)));
    if (security != nullptr) mesh.crypto[peer].resize(mesh.sockets[peer].size());
    if (addr->host_id == c.host_id) ++same_host;
    expected += mesh.sockets[peer].size();
  }
  Acceptor acceptor(listen_fd, c, security, mesh.sockets, mesh.crypto, keys);
  return acceptor.run(expected);
}

}  // namespace

Result<std::string> encode_address(const PeerAddress& a) {
  for (const std::string* field : {&a.host_id, &a.ip, &a.machine}) {
    if (field->empty() || field->size() > kMaxAddressField ||
        field->find('\n') != std::string::npos) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("address record field '{}' is empty, longer than {} bytes or "
                                "holds a newline", log::printable(*field), kMaxAddressField));
    }
  }
  std::string record = fmt::format("{}\n{}\n{}\n{}", a.host_id, a.ip, a.port, a.machine);
  if (a.static_key) record += "\n" + encode_static_key_line(*a.static_key);
  return record;
}

Result<PeerAddress> parse_address(std::string_view text, int rank) {
  auto malformed = [rank](std::string_view why) {
    return Status(ErrorCode::protocol,
                  fmt::format("malformed address record of rank {}: {}", rank, why));
  };
  if (text.size() > kMaxAddressRecord) {
    return malformed(fmt::format("{} bytes, more than {}", text.size(), kMaxAddressRecord));
  }
  std::vector<std::string_view> lines;
  for (size_t start = 0;;) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (lines.size() != 4 && lines.size() != 5) {
    return malformed(fmt::format("{} lines, expected 4 or 5", lines.size()));
  }
  for (size_t i : {0, 1, 3}) {
    if (lines[i].empty() || lines[i].size() > kMaxAddressField) {
      return malformed(fmt::format("line {} is empty or longer than {} bytes", i + 1,
                                   kMaxAddressField));
    }
  }
  PeerAddress a;
  a.host_id = lines[0];
  a.ip = lines[1];
  a.machine = lines[3];
  unsigned port = 0;
  const std::string_view p = lines[2];
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port == 0 || port > 65535) {
    return Status(ErrorCode::protocol, fmt::format("bad port '{}' published by rank {}",
                                                   log::printable(p), rank));
  }
  a.port = static_cast<uint16_t>(port);
  if (lines.size() == 5) {
    auto key = parse_static_key_line(lines[4], rank);
    if (!key.ok()) return key.status();
    a.static_key = key.value();
  }
  return a;
}

Result<Mesh> connect_mesh(Store& store, const MeshConfig& c) {
  Mesh mesh;
  std::vector<std::vector<Fd>>& sockets = mesh.sockets;
  sockets.resize(static_cast<size_t>(c.size));  // sized per peer once its host is known
  if (c.size == 1) return mesh;
  int same_host_above = 0, same_host_below = 0;
  const bool secure = c.security != security::SecurityMode::off;
  std::optional<LocalSecurity> local;
  if (secure) {
    if (c.job_key == nullptr) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("rank {}: security={} needs a job key", c.rank,
                                security::to_string(c.security)));
    }
    auto keypair = security::X25519Keypair::generate();
    if (!keypair.ok()) return keypair.status();
    local.emplace(LocalSecurity{c.security, c.job_key, std::move(keypair.value()),
                                security::cpu_has_aes_acceleration()});
    mesh.crypto.resize(static_cast<size_t>(c.size));
    log::debug("rank {}: TCP links secured (security={}, {} on this CPU)", c.rank,
               security::to_string(c.security), local->has_aes ? "AES" : "no AES");
  }

  auto ip = select_interface_address(c.interface);
  if (!ip.ok()) return ip.status();
  auto listener = listen_tcp(c.interface.empty() ? "" : ip.value(), 0);
  if (!listener.ok()) return listener.status();
  auto port = local_port(listener->get());
  if (!port.ok()) return port.status();
  PeerAddress self{c.host_id, ip.value(), port.value(), this_machine(), std::nullopt};
  if (secure) self.static_key = StaticKeyRecord{local->static_key.public_key, local->has_aes};
  auto record = encode_address(self);
  if (!record.ok()) return record.status();
  WEFT_RETURN_IF_ERROR(store.set(addr_key(c.rank), record.value()));
  log::debug("rank {}: listening on {}:{} (host {})", c.rank, ip.value(), port.value(), c.host_id);

  Status accept_status;
  const LocalSecurity* local_security = local ? &*local : nullptr;
  std::thread acceptor([&] {
    accept_status = accept_all(listener->get(), store, c, local_security, mesh, same_host_above);
  });

  Status connect_status;
  std::vector<int> below;
  for (int peer = 0; peer < c.rank; ++peer) below.push_back(peer);
  auto records = read_addresses(store, c, below);
  if (!records.ok()) connect_status = records.status();
  // Secured sockets: message 1 goes out on every socket first, the answers are read after.
  struct Pending {
    int peer;
    int index;
    SecureInitiator initiator;
  };
  std::vector<Pending> pending;
  for (int peer = 0; peer < c.rank && connect_status.ok(); ++peer) {
    auto addr = parse_address(records.value()[static_cast<size_t>(peer)], peer);
    if (!addr.ok()) {
      connect_status = addr.status();
      break;
    }
    connect_status = check_reachable(c, addr.value(), peer);
    if (connect_status.ok()) connect_status = check_security(c, addr.value(), peer);
    if (!connect_status.ok()) break;
    std::string target = addr->host_id == c.host_id ? "127.0.0.1" : addr->ip;
    const int count = sockets_for(c, addr->host_id);
    if (addr->host_id == c.host_id) ++same_host_below;
    sockets[peer].resize(static_cast<size_t>(count));
    if (secure) mesh.crypto[peer].resize(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      auto fd = connect_tcp(target, addr->port, c.deadline, OnRefused::retry);
      if (!fd.ok()) {
        connect_status = fd.status().with_context(
            fmt::format("rank {}: connecting to rank {}", c.rank, peer));
        break;
      }
      if (!secure) {
        connect_status = send_hello(fd->get(), c, i, count);
      } else {
        std::vector<uint8_t> first;
        Hello hello{c.token, static_cast<uint32_t>(c.rank), static_cast<uint32_t>(c.size),
                    static_cast<uint32_t>(i), static_cast<uint32_t>(count)};
        auto initiator =
            SecureInitiator::start(*local, addr->static_key.value(), c.token, hello, peer, first);
        connect_status = initiator.status();
        if (connect_status.ok()) {
          connect_status = send_all(fd->get(), first.data(), first.size(), c.deadline);
          pending.push_back({peer, i, std::move(initiator.value())});
        }
      }
      if (!connect_status.ok()) {
        connect_status = connect_status.with_context(
            fmt::format("rank {}: setting up socket {} to rank {}", c.rank, i, peer));
        break;
      }
      sockets[peer][i] = std::move(fd.value());
    }
  }
  for (Pending& p : pending) {
    if (!connect_status.ok()) break;
    const int fd = sockets[p.peer][p.index].get();
    std::vector<uint8_t> answer(kSecureAnswerBytes), confirm;
    connect_status = recv_all(fd, answer.data(), answer.size(), c.deadline);
    if (connect_status.ok()) {
      connect_status = p.initiator.finish(answer, mesh.crypto[p.peer][p.index], confirm);
    }
    if (connect_status.ok()) {
      connect_status = send_all(fd, confirm.data(), confirm.size(), c.deadline);
    }
    if (!connect_status.ok()) {
      connect_status = connect_status.with_context(
          fmt::format("rank {}: handshake on socket {} with rank {}", c.rank, p.index, p.peer));
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
