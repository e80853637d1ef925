// TCP store server: one thread runs an epoll loop over non-blocking sockets.
//
// Per connection the server reads frames, hands each request to the TcpStoreTable and queues the
// reply. It reads the next request only after the previous reply is fully sent and no request is
// parked, so each connection buffers at most one frame in and one reply out (flow control without
// extra limits), and a parked get/wait costs nothing until a set wakes it or its deadline passes.
// A malformed frame closes that connection only. The destructor wakes the thread via an eventfd,
// joins it, and closes every socket.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "base/fd.h"
#include "base/log.h"
#include "base/socket.h"
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

struct Connection {
  Fd fd;
  std::string peer;
  std::vector<uint8_t> in;  // received bytes; in_off of them already parsed
  size_t in_off = 0;
  std::vector<uint8_t> out;  // reply bytes; out_off of them already sent
  size_t out_off = 0;
  bool parked = false;  // a get/wait of this connection waits in the table
  bool eof = false;     // the client closed its side
  uint32_t events = 0;  // current epoll interest

  bool sending() const { return out_off < out.size(); }
};

class Server final : public TcpStoreServer {
 public:
  Server(Fd listen, Fd epoll, Fd wake, uint16_t port)
      : listen_(std::move(listen)), epoll_(std::move(epoll)), wake_(std::move(wake)), port_(port) {}

  ~Server() override {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
  }

  uint16_t port() const override { return port_; }

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

  Fd listen_, epoll_, wake_;
  const uint16_t port_;
  std::jthread thread_;  // joined by the destructor, after it wakes the loop

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
    deliver_completions();
    while (!resume_.empty()) {
      ConnId id = resume_.back();
      resume_.pop_back();
      service(id);
    }
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
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ConnId id = next_id_++;
    Connection c;
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
  }
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
    size_t consumed = 0;
    std::span<const uint8_t> pending(c.in.data() + c.in_off, c.in.size() - c.in_off);
    Result<std::optional<tcp_store::Request>> req = tcp_store::decode_request(pending, &consumed);
    if (!req.ok()) {
      log::warn("weft store on port {}: closing client {}: {}", port_, c.peer,
                req.status().message());
      return close_connection(id, "bad frame");
    }
    if (!req->has_value()) break;
    c.in_off += consumed;
    tcp_store::Request& r = **req;
    const Command command = r.command;
    std::optional<tcp_store::Reply> reply = table_.handle(id, std::move(r), Clock::now());
    if (reply) {
      c.out = tcp_store::encode_reply(command, *reply);
      c.out_off = 0;
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
    c.out = tcp_store::encode_reply(done.command, done.reply);
    c.out_off = 0;
    resume_.push_back(done.conn);
  }
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
}

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& host,
                                                              uint16_t port) {
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
  auto server = std::make_unique<Server>(std::move(listen.value()), std::move(epoll),
                                         std::move(wake), bound.value());
  server->begin();
  log::info("weft store listening on {}", host_port(host.empty() ? "*" : host, bound.value()));
  return std::unique_ptr<TcpStoreServer>(std::move(server));
}

}  // namespace weft
