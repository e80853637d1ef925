// TCP store client.
//
// Calls block the calling thread. Each call borrows a connection from a small pool (opening a new
// one when all are busy) and returns it afterwards, so a get() parked on the server in one thread
// never holds up a set() from another thread of the same process; the pool's mutex is held only
// to take or return a connection. A connection that saw any error is closed, never reused; the
// next call opens a fresh one, retrying until its deadline (the server may be starting or
// restarting). Waiting calls send their timeout to the server, which answers "timeout" itself;
// the client waits kReplyGrace longer before it gives up on a silent server. With a job key the
// hello starts a session (tcp_store_auth.h) and every later frame is a record; a client with a
// key refuses a server without one (it could be anybody's), and a pooled connection the server
// closed while idle is noticed (poll) and replaced before use.
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "base/mutex.h"
#include "base/socket.h"
#include "rendezvous/store_common.h"
#include "rendezvous/tcp_store_auth.h"
#include "rendezvous/tcp_store_protocol.h"
#include "weft/store.h"

namespace weft {
namespace {

using namespace tcp_store;  // NOLINT: the protocol vocabulary is the subject of this file
using std::chrono::milliseconds;

constexpr milliseconds kReplyGrace(2000);
// A call whose own timeout is shorter still gets this long to open a connection when none is idle
// (never more than the client's default timeout), so get(key, 0ms) works under contention.
constexpr milliseconds kMinConnectWindow(250);
constexpr milliseconds kRetryMin(10);
constexpr milliseconds kRetryMax(500);
constexpr size_t kMaxIdleConnections = 8;

// A greeted connection and, with a key, its session.
struct Conn {
  Fd fd;
  std::optional<Session> session;
};

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(std::string host, uint16_t port, milliseconds default_timeout,
                 std::shared_ptr<const security::JobKey> key)
      : host_(std::move(host)),
        port_(port),
        where_(host_port(host_, port)),
        default_timeout_(clamp_timeout(default_timeout)),
        key_(std::move(key)) {}

  // Opens the first connection (retrying until the deadline) and keeps it in the pool.
  Status connect_first(milliseconds timeout) {
    Result<Conn> fd = open_connection(deadline_after(timeout));
    if (!fd.ok()) return fd.status();
    give_back(std::move(fd.value()));
    return Status::success();
  }

  Status set(std::string_view key, const Bytes& value) override {
    Request req;
    req.command = Command::set;
    req.key = key;
    WEFT_RETURN_IF_ERROR(in_context(check_key(key), req, quote_key(key)));
    WEFT_RETURN_IF_ERROR(in_context(check_value_size(value.size()), req, quote_key(key)));
    req.value = value;
    return call(std::move(req), default_timeout_, quote_key(key)).status();
  }

  Result<Bytes> get(std::string_view key, milliseconds timeout) override {
    Request req;
    req.command = Command::get;
    req.key = key;
    WEFT_RETURN_IF_ERROR(in_context(check_key(key), req, quote_key(key)));
    Result<Reply> r = call(std::move(req), timeout, quote_key(key));
    if (!r.ok()) return r.status();
    return std::move(r->value);
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    Request req;
    req.command = Command::add;
    req.key = key;
    req.delta = delta;
    WEFT_RETURN_IF_ERROR(in_context(check_key(key), req, quote_key(key)));
    Result<Reply> r = call(std::move(req), default_timeout_, quote_key(key));
    if (!r.ok()) return r.status();
    return r->integer;
  }

  Status wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    Request req;
    req.command = Command::wait;
    WEFT_RETURN_IF_ERROR(check_keys(keys, req));
    req.keys = keys;
    return call(std::move(req), timeout, quote_keys(keys)).status();
  }

  Result<bool> check(const std::vector<std::string>& keys) override {
    Request req;
    req.command = Command::check;
    WEFT_RETURN_IF_ERROR(check_keys(keys, req));
    req.keys = keys;
    Result<Reply> r = call(std::move(req), default_timeout_, quote_keys(keys));
    if (!r.ok()) return r.status();
    return r->flag;
  }

  Result<std::vector<Bytes>> multi_get(const std::vector<std::string>& keys,
                                       milliseconds timeout) override {
    Request req;
    req.command = Command::multi_get;
    WEFT_RETURN_IF_ERROR(check_keys(keys, req));
    req.keys = keys;
    Result<Reply> r = call(std::move(req), timeout, quote_keys(keys));
    if (!r.ok()) return r.status();
    if (r->values.size() != keys.size()) {
      return Status(ErrorCode::protocol,
                    fmt::format("tcp store {}: multi_get({}): {} values in the reply to {} keys",
                                where_, quote_keys(keys), r->values.size(), keys.size()));
    }
    return std::move(r->values);
  }

  Status erase(std::string_view key) override {
    Request req;
    req.command = Command::erase;
    req.key = key;
    WEFT_RETURN_IF_ERROR(in_context(check_key(key), req, quote_key(key)));
    return call(std::move(req), default_timeout_, quote_key(key)).status();
  }

 private:
  // "tcp store host:port: get('key'): <message>"
  Status in_context(const Status& s, const Request& req, const std::string& what) const {
    return s.with_context(
        fmt::format("tcp store {}: {}({})", where_, to_string(req.command), what));
  }

  // Count, per-key and whole-frame limits of a wait or check.
  Status check_keys(const std::vector<std::string>& keys, const Request& req) const {
    WEFT_RETURN_IF_ERROR(in_context(check_key_count(keys.size()), req, quote_keys(keys)));
    size_t payload = 1 + 4 + 8;  // command, count, timeout
    for (const auto& k : keys) {
      WEFT_RETURN_IF_ERROR(in_context(check_key(k), req, quote_keys(keys)));
      payload += 4 + k.size();
    }
    if (payload <= kMaxPayloadBytes) return Status::success();
    return in_context(Status(ErrorCode::invalid_argument,
                             fmt::format("the keys take {} bytes; a request may take at most {}",
                                         payload, kMaxPayloadBytes)),
                      req, quote_keys(keys));
  }

  // One request and its reply. `timeout` bounds the whole call; for get and wait it is also the
  // timeout the server applies, and a "timeout" reply becomes ErrorCode::timeout.
  Result<Reply> call(Request req, milliseconds timeout, const std::string& what) {
    timeout = clamp_timeout(timeout);
    const auto deadline = deadline_after(timeout);
    const bool waits = req.command == Command::get || req.command == Command::wait ||
                       req.command == Command::multi_get;
    const auto connect_deadline =
        std::max(deadline, deadline_after(std::min(default_timeout_, kMinConnectWindow)));
    Result<Conn> fd = take_connection(connect_deadline);
    if (!fd.ok()) return in_context(fd.status(), req, what);
    if (waits) {
      // Rounded up: the server must not give up before this call's deadline.
      auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      req.timeout_ms = static_cast<uint64_t>(std::max<int64_t>(0, left.count()));
    }
    Bytes frame = encode_request(req);
    Result<Reply> r = exchange(std::move(fd.value()), req.command, frame,
                               waits ? std::max(deadline, Clock::now()) + kReplyGrace
                                     : std::max(deadline, connect_deadline));
    if (!r.ok()) return in_context(r.status(), req, what);
    if (r->code == ReplyCode::error) return in_context(Status(r->error, r->message), req, what);
    if (r->code == ReplyCode::timeout) {
      return in_context(Status(ErrorCode::timeout, "timed out after " + format_ms(timeout)), req,
                        what);
    }
    return r;
  }

  // Sends a frame and reads the reply; returns the connection to the pool only on success.
  Result<Reply> exchange(Conn conn, Command command, const Bytes& frame,
                         Clock::time_point deadline) {
    const int fd = conn.fd.get();
    if (conn.session) {
      Bytes record(security::sealed_size(frame.size()));
      WEFT_RETURN_IF_ERROR(conn.session->sealer.seal(frame, record));
      Status s = send_all(fd, record.data(), record.size(), deadline);
      uint8_t header[security::kRecordHeaderBytes];
      if (s.ok()) s = recv_all(fd, header, sizeof(header), deadline);
      if (!s.ok()) return no_reply(s);
      Result<size_t> body = conn.session->opener.body_size(header);
      if (!body.ok()) return body.status();
      Bytes in(security::kRecordHeaderBytes + body.value() + security::kTagBytes);
      std::copy(std::begin(header), std::end(header), in.begin());
      s = recv_all(fd, in.data() + sizeof(header), in.size() - sizeof(header), deadline);
      if (!s.ok()) return no_reply(s);
      Result<std::span<uint8_t>> opened = conn.session->opener.open(in);
      if (!opened.ok()) {
        return opened.status().with_context("the store's reply failed authentication");
      }
      std::span<const uint8_t> reply_frame = opened.value();
      Result<size_t> length = decode_length(reply_frame.first(std::min(reply_frame.size(),
                                                                      kLengthBytes)));
      if (!length.ok()) return length.status();
      if (reply_frame.size() != kLengthBytes + length.value()) {
        return Status(ErrorCode::protocol, "a reply record that is not exactly one frame");
      }
      Result<Reply> reply = decode_reply(command, reply_frame.subspan(kLengthBytes));
      if (reply.ok()) give_back(std::move(conn));
      return reply;
    }
    Status s = send_all(fd, frame.data(), frame.size(), deadline);
    uint8_t prefix[kLengthBytes];
    if (s.ok()) s = recv_all(fd, prefix, sizeof(prefix), deadline);
    if (!s.ok()) return no_reply(s);
    Result<size_t> length = decode_length(prefix);
    if (!length.ok()) return length.status();
    Bytes payload(length.value());
    s = recv_all(fd, payload.data(), payload.size(), deadline);
    if (!s.ok()) return no_reply(s);
    Result<Reply> reply = decode_reply(command, payload);
    if (reply.ok()) give_back(std::move(conn));
    return reply;
  }

  static Status no_reply(const Status& s) {
    if (s.code() == ErrorCode::timeout) {
      return Status(ErrorCode::timeout, "no reply from the server in time");
    }
    return s;
  }

  Result<Conn> take_connection(Clock::time_point deadline) EXCLUDES(mu_) {
    for (;;) {
      std::optional<Conn> conn;
      {
        MutexLock lock(mu_);
        if (idle_.empty()) break;
        conn.emplace(std::move(idle_.back()));
        idle_.pop_back();
      }
      // An idle connection has nothing to read; readable means the server closed it (its idle
      // timeout, a restart): take another.
      pollfd p{conn->fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) == 0) return std::move(*conn);
    }
    return open_connection(deadline);
  }

  void give_back(Conn conn) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
  }

  // Connects and says hello, retrying with growing pauses until the deadline.
  Result<Conn> open_connection(Clock::time_point deadline) {
    const auto start = Clock::now();
    auto pause = kRetryMin;
    for (;;) {
      Status last;
      Result<Fd> fd = connect_tcp(host_, port_, deadline);
      if (fd.ok()) {
        Result<Conn> ready = hello(std::move(fd.value()), deadline);
        // A server that answers but rejects us will not change its mind: no retry.
        if (ready.ok() || ready.status().code() == ErrorCode::protocol) return ready;
        last = ready.status();
      } else {
        last = fd.status();
      }
      auto now = Clock::now();
      if (now >= deadline) {
        return Status(ErrorCode::timeout,
                      fmt::format("could not reach the weft store in {} ({})",
                                  format_ms(std::chrono::duration_cast<milliseconds>(now - start)),
                                  last.message()));
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, kRetryMax);
    }
  }

  Result<Conn> hello(Fd fd, Clock::time_point deadline) {
    Request ping;  // command ping with magic, version and nonce
    Result<Nonce> nonce = random_nonce();
    if (!nonce.ok()) return nonce.status();
    ping.nonce = nonce.value();
    Bytes frame = encode_request(ping);
    Status s = send_all(fd.get(), frame.data(), frame.size(), deadline);
    uint8_t prefix[kLengthBytes];
    if (s.ok()) s = recv_all(fd.get(), prefix, sizeof(prefix), deadline);
    if (!s.ok()) return s.with_context("handshake");
    Result<size_t> length = decode_length(prefix);
    if (!length.ok()) return length.status().with_context("handshake (is this a weft store?)");
    Bytes payload(length.value());
    s = recv_all(fd.get(), payload.data(), payload.size(), deadline);
    if (!s.ok()) return s.with_context("handshake");
    Result<Reply> reply = decode_reply(Command::ping, payload);
    if (!reply.ok()) return reply.status().with_context("handshake (is this a weft store?)");
    if (reply->code != ReplyCode::ok) {
      return Status(ErrorCode::protocol, "handshake rejected: " + reply->message);
    }
    if (reply->auth && !key_) {
      return Status(ErrorCode::protocol,
                    "the store requires the job key: set WEFT_AUTH_KEY_FILE to the job's key file");
    }
    if (!reply->auth && key_) {
      return Status(ErrorCode::protocol,
                    "the store does not authenticate (started without WEFT_AUTH_KEY_FILE, or not "
                    "this job's store); a client with a job key refuses it");
    }
    Conn conn{std::move(fd), std::nullopt};
    if (key_) {
      Result<Session> s = make_session(*key_, /*server=*/false, ping.nonce, reply->nonce, where_);
      if (!s.ok()) return s.status();
      conn.session.emplace(std::move(s).value());
    }
    return conn;
  }

  const std::string host_;
  const uint16_t port_;
  const std::string where_;  // "host:port" for messages
  const milliseconds default_timeout_;
  const std::shared_ptr<const security::JobKey> key_;  // null: the store does not authenticate
  Mutex mu_;                                // a leaf, held only to take or return a connection
  std::vector<Conn> idle_ GUARDED_BY(mu_);  // connected, greeted, no request in flight
};

}  // namespace

Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 std::chrono::milliseconds timeout) {
  return connect_tcp_store_with_key(host, port, timeout, nullptr);
}

Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& auth_key_file) {
  std::shared_ptr<const security::JobKey> key;
  if (!auth_key_file.empty()) {
    Result<security::JobKey> k = security::read_job_key_file(auth_key_file);
    if (!k.ok()) return k.status().with_context("tcp store " + host_port(host, port));
    key = std::make_shared<const security::JobKey>(std::move(k).value());
  }
  return connect_tcp_store_with_key(host, port, timeout, std::move(key));
}

Result<std::shared_ptr<Store>> connect_tcp_store_with_key(
    const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
    std::shared_ptr<const security::JobKey> key) {
  if (host.empty() || port == 0) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("tcp store: cannot connect to '{}' port {}", host, port));
  }
  auto client = std::make_shared<TcpStoreClient>(host, port, timeout, std::move(key));
  Status s = client->connect_first(timeout);
  if (!s.ok()) return s.with_context("tcp store " + host_port(host, port));
  return std::shared_ptr<Store>(std::move(client));
}

}  // namespace weft
