// TCP store server: one thread runs an epoll loop over non-blocking sockets.
//
// Per connection the server reads frames, hands each request to the TcpStoreTable and queues the
// reply. It reads the next request only after the previous reply is fully sent and no request is
// parked, so each connection buffers at most one frame in and one reply out, and a parked get/wait
// costs nothing until a set wakes it or its deadline passes. On top of that (TcpStoreConfig): a
// reply that would take the bytes held over max_buffered_bytes is refused with an error, a client
// that does not take its reply within stall_timeout is dropped, idle connections are closed, and
// at max_connections the least recently active idle client is evicted for a new one. With a job
// key, the first frame must be the ping and every later one a record that opens
// (tcp_store_auth.h); anything else drops the client. A malformed frame closes that connection
// only. The destructor wakes the thread via an eventfd, joins it, and closes every socket.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "base/fd.h"
#include "base/log.h"
#include "base/socket.h"
#include "rendezvous/tcp_store_auth.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_table.h"
#include "weft/store.h"

namespace weft {
namespace {

using tcp_store::Command;
using tcp_store::TcpStoreTable;
using ConnId = TcpStoreTable::ConnId;

constexpr ConnId kListenId = 0;
constexpr ConnId kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadBudget = 1 << 20;    // bytes read per readiness event, for fairness
constexpr size_t kKeepCapacity = 1 << 20;  // larger buffers are released once drained
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE and friends
constexpr size_t kFdReserve = 16;
constexpr size_t kSendBufferBytes = 256 << 10;  // descriptors kept free below RLIMIT_NOFILE
// A ping frame (length, command, magic, version, nonce): what an unauthenticated client may send.
constexpr size_t kMaxHelloBytes = tcp_store::kLengthBytes + 1 + 4 + 4 + tcp_store::kNonceBytes;

struct Connection {
  Fd fd;
  std::string peer;
  std::vector<uint8_t> in;  // received bytes; in_off of them already parsed
  size_t in_off = 0;
  std::vector<uint8_t> out;  // reply bytes; out_off of them already sent
  size_t out_off = 0;
  bool parked = false;  // a get/wait of this connection waits in the table
  bool eof = false;     // the client closed its side
  bool greeted = false;  // the ping exchange is done
  uint32_t events = 0;  // current epoll interest
  std::optional<tcp_store::Session> session;  // with a job key, after the ping
  Clock::time_point last_active;  // last byte received or sent
  Clock::time_point opened;

  bool sending() const { return out_off < out.size(); }
  size_t held() const { return (in.size() - in_off) + (out.size() - out_off); }
};

class Server final : public TcpStoreServer {
 public:
  Server(Fd listen, Fd epoll, Fd wake, uint16_t port, const TcpStoreConfig& config,
         std::shared_ptr<const security::JobKey> key)
      : listen_(std::move(listen)),
        epoll_(std::move(epoll)),
        wake_(std::move(wake)),
        port_(port),
        config_(config),
        key_(std::move(key)),
        table_(config.max_data_bytes) {}

  ~Server() override {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
  }

  uint16_t port() const override { return port_; }

  TcpStoreStats stats() const override {
    TcpStoreStats s;
    s.connections = connections_.load();
    s.data_bytes = data_bytes_.load();
    s.buffered_bytes = buffered_.load();
    s.peak_buffered_bytes = peak_buffered_.load();
    s.rejected_unauthenticated = rejected_.load();
    s.dropped_idle = dropped_idle_.load();
    s.dropped_stalled = dropped_stalled_.load();
    s.refused_busy = refused_busy_.load();
    s.evicted = evicted_.load();
    return s;
  }

  void begin() {
    thread_ = std::jthread([this] { loop(); });
  }

 private:
  void loop();
  void accept_all();
  void on_event(ConnId id, uint32_t events);
  bool read_some(Connection& c);
  bool flush(Connection& c);
  void service(ConnId id);
  void deliver_completions();
  void close_connection(ConnId id, const std::string& why);
  void update_interest(ConnId id, Connection& c);
  int epoll_timeout_ms() const;
  // Encodes (and with a key seals) a reply into c.out; refuses it when the server holds too much.
  bool queue_reply(Connection& c, Command command, const tcp_store::Reply& reply);
  // The next request of c, nullopt when more bytes are needed; an error drops the client.
  Result<std::optional<tcp_store::Request>> next_request(Connection& c);
  Status greet(Connection& c, const tcp_store::Request& ping);
  void sweep(Clock::time_point now);   // idle and stalled connections
  bool make_room_for_one();            // evicts at max_connections; false: refuse the newcomer
  void account();                      // refreshes buffered_ and the peak
  size_t connection_cap() const;

  Fd listen_, epoll_, wake_;
  const uint16_t port_;
  const TcpStoreConfig config_;
  const std::shared_ptr<const security::JobKey> key_;  // null: no authentication
  std::jthread thread_;  // joined by the destructor, after it wakes the loop

  // Written by the server thread, read by stats() from any thread.
  std::atomic<size_t> connections_{0}, data_bytes_{0}, buffered_{0}, peak_buffered_{0};
  std::atomic<uint64_t> rejected_{0}, dropped_idle_{0}, dropped_stalled_{0}, refused_busy_{0},
      evicted_{0};

  // Everything below belongs to the server thread.
  TcpStoreTable table_;
  std::unordered_map<ConnId, Connection> conns_;
  std::vector<ConnId> resume_;  // connections with a fresh reply to send / requests to read
  ConnId next_id_ = 2;
  bool accept_paused_ = false;
  Clock::time_point accept_resume_at_{};
};

void Server::loop() {
  epoll_event events[64];
  bool stopping = false;
  while (!stopping) {
    int n = ::epoll_wait(epoll_.get(), events, 64, epoll_timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("weft store: epoll_wait failed ({}); the server stops", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      ConnId id = events[i].data.u64;
      if (id == kWakeId) {
        stopping = true;
      } else if (id == kListenId) {
        accept_all();
      } else {
        on_event(id, events[i].events);
      }
    }
    table_.expire(Clock::now());
    sweep(Clock::now());
    deliver_completions();
    while (!resume_.empty()) {
      ConnId id = resume_.back();
      resume_.pop_back();
      service(id);
    }
    account();
    if (accept_paused_ && Clock::now() >= accept_resume_at_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenId;
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listen_.get(), &ev);
      accept_paused_ = false;
    }
  }
  conns_.clear();
}

int Server::epoll_timeout_ms() const {
  std::optional<Clock::time_point> next = table_.next_deadline();
  if (accept_paused_ && (!next || accept_resume_at_ < *next)) next = accept_resume_at_;
  // With clients connected, wake once a second to close idle and stalled ones.
  if (!conns_.empty()) {
    auto tick = Clock::now() + std::chrono::seconds(1);
    if (!next || tick < *next) next = tick;
  }
  if (!next) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  if (ms < 0) return 0;
  return ms > 60000 ? 60000 : static_cast<int>(ms);
}

void Server::accept_all() {
  for (;;) {
    Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: stop accepting for a moment instead of spinning.
      log::warn("weft store on port {}: accept failed ({}); pausing new connections", port_,
                std::strerror(errno));
      epoll_event ev{};
      ev.data.u64 = kListenId;
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listen_.get(), &ev);
      accept_paused_ = true;
      accept_resume_at_ = Clock::now() + kAcceptPause;
      return;
    }
    if (!make_room_for_one()) {
      log::warn("weft store on port {}: {} clients connected (the limit), all busy; refusing {}",
                port_, conns_.size(), peer_name(fd.get()));
      continue;  // closes fd
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // A fixed send buffer: a reply a client does not read stays in c.out, where the buffered
    // bytes limit and the stall timeout see it, instead of megabytes of kernel memory.
    int sndbuf = static_cast<int>(kSendBufferBytes);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    ConnId id = next_id_++;
    Connection c;
    c.opened = c.last_active = Clock::now();
    c.peer = peer_name(fd.get());
    c.fd = std::move(fd);
    c.events = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c.events;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), &ev) != 0) {
      log::warn("weft store: epoll_ctl for {} failed: {}", c.peer, std::strerror(errno));
      continue;
    }
    log::debug("weft store: client {} connected", c.peer);
    conns_.emplace(id, std::move(c));
    connections_.store(conns_.size());
  }
}

size_t Server::connection_cap() const {
  rlimit lim{};
  size_t cap = config_.max_connections;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const size_t fds = static_cast<size_t>(lim.rlim_cur);
    cap = std::min(cap, fds > 2 * kFdReserve ? fds - kFdReserve : kFdReserve);
  }
  return std::max<size_t>(cap, 1);
}

bool Server::make_room_for_one() {
  if (conns_.size() < connection_cap()) return true;
  // The least recently active client with nothing in flight; one that has not finished its hello
  // goes first.
  std::optional<ConnId> victim;
  std::pair<bool, Clock::time_point> best{true, Clock::time_point::max()};
  for (auto& [id, c] : conns_) {
    if (c.parked || c.sending()) continue;
    std::pair<bool, Clock::time_point> rank{c.greeted, c.last_active};
    if (!victim || rank < best) {
      victim = id;
      best = rank;
    }
  }
  if (!victim) return false;
  ++evicted_;
  close_connection(*victim, "evicted for a new client (connection limit)");
  return true;
}

void Server::sweep(Clock::time_point now) {
  std::vector<std::pair<ConnId, bool>> doomed;  // id, stalled (else idle)
  for (auto& [id, c] : conns_) {
    const auto quiet = now - c.last_active;
    if ((c.sending() || !c.greeted) && quiet >= config_.stall_timeout) {
      doomed.emplace_back(id, true);
    } else if (!c.parked && !c.sending() && quiet >= config_.idle_timeout) {
      doomed.emplace_back(id, false);
    }
  }
  for (auto [id, stalled] : doomed) {
    if (stalled) {
      ++dropped_stalled_;
      log::warn("weft store on port {}: dropping client {}: it took nothing for {} ms", port_,
                conns_.at(id).peer, config_.stall_timeout.count());
      close_connection(id, "stalled");
    } else {
      ++dropped_idle_;
      close_connection(id, "idle");
    }
  }
}

void Server::account() {
  size_t held = 0;
  for (auto& [id, c] : conns_) held += c.held();
  buffered_.store(held);
  if (held > peak_buffered_.load()) peak_buffered_.store(held);
  data_bytes_.store(table_.data_bytes());
  connections_.store(conns_.size());
}

void Server::on_event(ConnId id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = it->second;
  if (events & EPOLLERR) return close_connection(id, "socket error");
  if (events & EPOLLIN) {
    if (!read_some(c)) return close_connection(id, "receive failed");
  } else if (events & (EPOLLHUP | EPOLLRDHUP)) {
    // Not reading (parked or sending) and the client went away: drop its parked request.
    return close_connection(id, "client hung up");
  }
  service(id);
}

bool Server::read_some(Connection& c) {
  size_t budget = kReadBudget;
  while (budget > 0 && !c.eof) {
    size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t k = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, MSG_DONTWAIT);
    c.in.resize(old + (k > 0 ? static_cast<size_t>(k) : 0));
    if (k > 0) {
      c.last_active = Clock::now();
      budget -= std::min(budget, static_cast<size_t>(k));
    } else if (k == 0) {
      c.eof = true;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

bool Server::flush(Connection& c) {
  while (c.sending()) {
    ssize_t k = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      c.last_active = Clock::now();
      c.out_off += static_cast<size_t>(k);
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else if (k < 0 && errno != EINTR) {
      return false;
    }
  }
  c.out_off = 0;
  if (c.out.capacity() > kKeepCapacity) {
    std::vector<uint8_t>().swap(c.out);
  } else {
    c.out.clear();
  }
  return true;
}

// Sends what is queued, then runs the connection's buffered requests while it is free to.
void Server::service(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = it->second;
  for (;;) {
    if (!flush(c)) return close_connection(id, "send failed");
    if (c.sending() || c.parked) break;
    Result<std::optional<tcp_store::Request>> req = next_request(c);
    if (!req.ok()) {
      log::warn("weft store on port {}: closing client {}: {}", port_, c.peer,
                req.status().message());
      return close_connection(id, "bad frame");
    }
    if (!req->has_value()) break;
    tcp_store::Request& r = **req;
    const Command command = r.command;
    if (!c.greeted && (command == Command::ping || key_)) {
      Status g = greet(c, r);
      if (!g.ok()) {
        log::warn("weft store on port {}: closing client {}: {}", port_, c.peer, g.message());
        return close_connection(id, "hello refused");
      }
      continue;
    }
    c.greeted = true;  // without a key a client may skip the ping (protocol version 1 allowed it)
    std::optional<tcp_store::Reply> reply = table_.handle(id, std::move(r), Clock::now());
    if (reply) {
      if (!queue_reply(c, command, *reply)) return close_connection(id, "seal failed");
    } else {
      c.parked = true;
    }
    deliver_completions();  // a set may have answered other connections' parked requests
  }
  // Drop parsed bytes; release a large buffer once it is drained.
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_off));
  c.in_off = 0;
  if (c.in.empty() && c.in.capacity() > kKeepCapacity) std::vector<uint8_t>().swap(c.in);
  if (c.eof && !c.parked && !c.sending()) return close_connection(id, "client closed");
  update_interest(id, c);
}

void Server::deliver_completions() {
  for (auto& done : table_.take_completions()) {
    auto it = conns_.find(done.conn);
    if (it == conns_.end()) continue;
    Connection& c = it->second;
    c.parked = false;
    if (!queue_reply(c, done.command, done.reply)) {
      close_connection(done.conn, "seal failed");
      continue;
    }
    resume_.push_back(done.conn);
  }
}

Result<std::optional<tcp_store::Request>> Server::next_request(Connection& c) {
  using Out = std::optional<tcp_store::Request>;
  std::span<uint8_t> pending(c.in.data() + c.in_off, c.in.size() - c.in_off);
  size_t consumed = 0;
  if (!c.session) {
    if (key_ && !c.greeted && pending.size() > kMaxHelloBytes) {
      ++rejected_;
      return Status(ErrorCode::protocol, "unauthenticated client: the first frame is no ping");
    }
    Result<Out> req = tcp_store::decode_request(pending, &consumed);
    if (!req.ok() || !req->has_value()) return req;
    c.in_off += consumed;
    if (key_ && c.greeted) {
      ++rejected_;
      return Status(ErrorCode::protocol, "unauthenticated request");
    }
    return req;
  }
  // One record holding one whole frame.
  if (pending.size() < security::kRecordHeaderBytes) return Out();
  Result<size_t> body = c.session->opener.body_size(
      std::span<const uint8_t, security::kRecordHeaderBytes>(pending.data(),
                                                            security::kRecordHeaderBytes));
  if (!body.ok()) {
    ++rejected_;
    return body.status();
  }
  const size_t total = security::kRecordHeaderBytes + body.value() + security::kTagBytes;
  if (pending.size() < total) return Out();
  Result<std::span<uint8_t>> frame = c.session->opener.open(pending.first(total));
  if (!frame.ok()) {
    ++rejected_;
    return Status(ErrorCode::protocol,
                  "request failed authentication (wrong job key, replayed or altered): " +
                      frame.status().message());
  }
  c.in_off += total;
  Result<Out> req = tcp_store::decode_request(frame.value(), &consumed);
  if (!req.ok()) return req;
  if (!req->has_value() || consumed != frame->size()) {
    return Status(ErrorCode::protocol, "a record that is not exactly one request");
  }
  if ((**req).command == Command::ping) {
    return Status(ErrorCode::protocol, "a second ping on an authenticated connection");
  }
  return req;
}

Status Server::greet(Connection& c, const tcp_store::Request& ping) {
  c.greeted = true;
  tcp_store::Reply reply;
  reply.integer = tcp_store::kVersion;
  if (ping.command != Command::ping) {
    ++rejected_;
    return Status(ErrorCode::protocol,
                  fmt::format("unauthenticated {} request: this store requires the job key "
                              "(WEFT_AUTH_KEY_FILE)",
                              tcp_store::to_string(ping.command)));
  }
  if (ping.version == 0 || ping.version > tcp_store::kVersion) {
    // Answered, not dropped, so the client can say why.
    c.out = tcp_store::encode_reply(
        Command::ping,
        tcp_store::Reply::failure(ErrorCode::protocol,
                                  fmt::format("client speaks store protocol version {}, this "
                                              "server speaks {}",
                                              ping.version, tcp_store::kVersion)));
    c.out_off = 0;
    c.greeted = false;  // nothing else is served on this connection
    return Status::success();
  }
  if (key_ && ping.version < 2) {
    ++rejected_;
    return Status(ErrorCode::protocol,
                  fmt::format("client of protocol version {} cannot authenticate; this store "
                              "requires the job key (WEFT_AUTH_KEY_FILE)",
                              ping.version));
  }
  if (ping.version < 2) reply.integer = 1;  // answer an old client in its own format
  if (key_) {
    Result<tcp_store::Nonce> nonce = tcp_store::random_nonce();
    if (!nonce.ok()) return nonce.status();
    reply.auth = true;
    reply.nonce = nonce.value();
  }
  c.out = tcp_store::encode_reply(Command::ping, reply);  // in clear: the session starts after it
  c.out_off = 0;
  if (key_) {
    Result<tcp_store::Session> s =
        tcp_store::make_session(*key_, /*server=*/true, ping.nonce, reply.nonce, c.peer);
    if (!s.ok()) return s.status();
    c.session.emplace(std::move(s).value());
  }
  return Status::success();
}

bool Server::queue_reply(Connection& c, Command command, const tcp_store::Reply& reply) {
  Bytes frame = tcp_store::encode_reply(command, reply);
  size_t held = 0;
  for (auto& [id, other] : conns_) held += other.held();
  if (held + frame.size() > config_.max_buffered_bytes && frame.size() > 256) {
    ++refused_busy_;
    frame = tcp_store::encode_reply(
        command, tcp_store::Reply::failure(
                     ErrorCode::io, fmt::format("the store is busy: {} bytes of replies wait for "
                                                "clients that do not read (limit {}); retry",
                                                held, config_.max_buffered_bytes)));
  }
  c.out_off = 0;
  if (!c.session) {
    c.out = std::move(frame);
    return true;
  }
  c.out.assign(security::sealed_size(frame.size()), 0);
  Status s = c.session->sealer.seal(frame, c.out);
  if (!s.ok()) log::warn("weft store on port {}: sealing a reply to {}: {}", port_, c.peer,
                         s.message());
  return s.ok();
}

void Server::update_interest(ConnId id, Connection& c) {
  uint32_t want = EPOLLRDHUP;
  if (c.sending()) {
    want |= EPOLLOUT;
  } else if (!c.parked && !c.eof) {
    want |= EPOLLIN;
  }
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0) {
    return close_connection(id, "epoll_ctl failed");
  }
  c.events = want;
}

void Server::close_connection(ConnId id, const std::string& why) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  log::debug("weft store: client {} disconnected ({})", it->second.peer, why);
  table_.drop(id);
  conns_.erase(it);  // closing the fd also removes it from the epoll set
  connections_.store(conns_.size());
}

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& host,
                                                              uint16_t port) {
  return start(host, port, TcpStoreConfig());
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& host,
                                                              uint16_t port,
                                                              const TcpStoreConfig& config) {
  std::shared_ptr<const security::JobKey> key;
  if (!config.auth_key_file.empty()) {
    Result<security::JobKey> k = security::read_job_key_file(config.auth_key_file);
    if (!k.ok()) return k.status().with_context("weft store server");
    key = std::make_shared<const security::JobKey>(std::move(k).value());
  }
  return start_tcp_store_server(host, port, config, std::move(key));
}

Result<std::unique_ptr<TcpStoreServer>> start_tcp_store_server(
    const std::string& host, uint16_t port, const TcpStoreConfig& config,
    std::shared_ptr<const security::JobKey> key) {
  Result<Fd> listen = listen_tcp(host, port);
  if (!listen.ok()) return listen.status().with_context("weft store server");
  Result<uint16_t> bound = local_port(listen->get());
  if (!bound.ok()) return bound.status().with_context("weft store server");
  Fd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return errno_status("weft store server: epoll_create1");
  Fd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return errno_status("weft store server: eventfd");
  for (auto [fd, id] : {std::pair{listen->get(), kListenId}, std::pair{wake.get(), kWakeId}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return errno_status("weft store server: epoll_ctl");
    }
  }
  const bool authenticated = key != nullptr;
  auto server = std::make_unique<Server>(std::move(listen.value()), std::move(epoll),
                                         std::move(wake), bound.value(), config, std::move(key));
  server->begin();
  log::info("weft store listening on {}", host_port(host.empty() ? "*" : host, bound.value()));
  if (!authenticated) {
    log::warn("weft store on port {}: no job key (WEFT_AUTH_KEY_FILE): any client that reaches it "
              "can read and write every key", bound.value());
  }
  return std::unique_ptr<TcpStoreServer>(std::move(server));
}

}  // namespace weft
