// The TCP transport's set-up against strangers, and its secured links (security=auth|encrypt):
// messages of every size arrive intact while the sender's buffer stays untouched; an impostor
// without the job key is refused at the handshake; a proxy that flips, replays or cuts a record
// ends the link with a protocol error on both sides, and nothing of the record is delivered.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <sstream>
#include <thread>

#include "base/socket.h"
#include "runtime/buffer_pool.h"
#include "security/job_key.h"
#include "test_security.h"
#include "transport/factory.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/tcp_transport.h"
#include "weft/store.h"

namespace weft {
namespace {

using namespace std::chrono_literals;
using security::SecurityMode;
constexpr uint64_t kToken = 0x7ec5ec5ec0ffeeull;

// Before main: the factory's testing hook is set for every communicator of this binary.
const bool kSecuredSuites = weft::testing::test_security().mode != SecurityMode::off;

std::shared_ptr<const security::JobKey> new_key() {
  auto key = security::JobKey::generate();
  EXPECT_TRUE(key.ok());
  return std::make_shared<const security::JobKey>(std::move(key.value()));
}

TcpTransportConfig config(int rank, int size, SecurityMode mode,
                          std::shared_ptr<const security::JobKey> key, std::string host = "test") {
  TcpTransportConfig cfg;
  cfg.rank = rank;
  cfg.size = size;
  cfg.token = kToken;
  cfg.host_id = std::move(host);
  cfg.options.connect_timeout = 20s;
  cfg.security = mode;
  cfg.job_key = std::move(key);
  return cfg;
}

// Waits (up to 20 s) until the posted r is done.
void wait_done(Transport& t, Request& r) {
  Completion& done = *r.completion;
  const auto deadline = Completion::Clock::now() + 20s;
  while (!r.done() && Completion::Clock::now() < deadline) {
    uint32_t gen = done.generation();
    if (r.done()) break;
    t.wait(done, gen, &r, std::min(deadline, Completion::Clock::now() + 100ms));
  }
  ASSERT_TRUE(r.done()) << "request to/from rank " << r.peer << " did not finish";
}

void post(Transport& t, Request& r, Completion& done) {
  r.completion = &done;
  if (r.kind == Request::Kind::send) {
    t.post_send(&r);
  } else {
    t.post_recv(&r);
  }
}

// Posts r and waits until it is done.
void run(Transport& t, Request& r) {
  Completion done;
  post(t, r, done);
  wait_done(t, r);
}

// Request holds an atomic: filled in place.
void message(Request& r, Request::Kind kind, int peer, uint32_t tag, void* buf, size_t bytes) {
  r.reset();
  r.kind = kind;
  r.peer = peer;
  r.tag = p2p_tag(tag);
  r.buf = buf;
  r.bytes = bytes;
  r.fp.kind = kind == Request::Kind::send ? OpKind::send : OpKind::recv;
  r.fp.count = bytes;
}

// Makes `size` transports in threads over one store; set-up results in order of rank.
std::vector<Result<std::unique_ptr<Transport>>> make_all(
    Store& store, BufferPool& pool, int size, const std::function<TcpTransportConfig(int)>& cfg) {
  std::vector<Result<std::unique_ptr<Transport>>> out;
  for (int r = 0; r < size; ++r) out.emplace_back(Status(ErrorCode::internal, "not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = make_tcp_transport(cfg(r), store, pool); });
  }
  for (auto& t : threads) t.join();
  return out;
}

// rank 0's address record (port) once it is published.
uint16_t port_of(Store& store, int rank) {
  auto record = store.get_string("tcp/addr/" + std::to_string(rank), 10s);
  EXPECT_TRUE(record.ok());
  std::istringstream in(record.value());
  std::string host, ip, port;
  std::getline(in, host);
  std::getline(in, ip);
  std::getline(in, port);
  return static_cast<uint16_t>(std::stoi(port));
}

void close_all(std::vector<Result<std::unique_ptr<Transport>>>& ts) {
  std::vector<std::thread> threads;
  for (auto& t : ts) {
    if (t.ok()) threads.emplace_back([&] { close_tcp_transport(*t.value(), 5s); });
  }
  for (auto& t : threads) t.join();
}

// --- set-up against strangers (any security) ---------------------------------------------------

class TcpStrangers : public ::testing::TestWithParam<SecurityMode> {};

// Before the job's ranks connect, one stranger connects to rank 0 and stays silent and another
// sends garbage: both are dropped (the silent one at its own deadline), the job forms at once.
TEST_P(TcpStrangers, SilentAndGarbageConnectionsDoNotDelaySetup) {
  auto store = make_memory_store();
  BufferPool pool;
  const auto key = GetParam() == SecurityMode::off ? nullptr : new_key();
  constexpr int kSize = 3;
  std::vector<Result<std::unique_ptr<Transport>>> ts;
  for (int r = 0; r < kSize; ++r) ts.emplace_back(Status(ErrorCode::internal, "not run"));
  const auto start = std::chrono::steady_clock::now();
  std::thread rank0([&] {
    auto cfg = config(0, kSize, GetParam(), key);
    cfg.stranger_timeout = 30s;  // longer than the test: the job must not wait for the stranger
    ts[0] = make_tcp_transport(cfg, *store, pool);
  });
  const uint16_t port = port_of(*store, 0);
  auto silent = connect_tcp("127.0.0.1", port, Clock::now() + 10s, OnRefused::retry);
  ASSERT_TRUE(silent.ok());
  auto garbage = connect_tcp("127.0.0.1", port, Clock::now() + 10s, OnRefused::retry);
  ASSERT_TRUE(garbage.ok());
  std::vector<uint8_t> junk(200, 0x41);
  ASSERT_TRUE(send_all(garbage->get(), junk.data(), junk.size(), Clock::now() + 10s).ok());
  std::this_thread::sleep_for(50ms);  // rank 0 has accepted both before the ranks arrive
  std::vector<std::thread> others;
  for (int r = 1; r < kSize; ++r) {
    others.emplace_back([&, r] { ts[r] = make_tcp_transport(config(r, kSize, GetParam(), key), *store, pool); });
  }
  for (auto& t : others) t.join();
  rank0.join();
  const auto took = std::chrono::steady_clock::now() - start;
  for (int r = 0; r < kSize; ++r) ASSERT_TRUE(ts[r].ok()) << ts[r].status().to_string();
  EXPECT_LT(took, 5s);
  // The links work.
  uint64_t out = 42, in = 0;
  Request s;
  message(s, Request::Kind::send, 0, 1, &out, sizeof(out));
  Request r;
  message(r, Request::Kind::recv, 2, 1, &in, sizeof(in));
  std::thread sender([&] { run(*ts[2].value(), s); });
  run(*ts[0].value(), r);
  sender.join();
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(in, 42u);
  close_all(ts);
}

INSTANTIATE_TEST_SUITE_P(Modes, TcpStrangers,
                         ::testing::Values(SecurityMode::off, SecurityMode::encrypt));

// A silent stranger alone: rank 0 drops it at its own deadline; an expected rank that never
// comes is named in the timeout, and the stranger's address is given as a stranger's.
TEST(TcpStrangers, TimeoutNamesTheMissingRankNotTheStranger) {
  auto store = make_memory_store();
  BufferPool pool;
  Result<std::unique_ptr<Transport>> t0 = Status(ErrorCode::internal, "not run");
  ASSERT_TRUE(store->set("tcp/addr/1", std::string_view("test\n127.0.0.1\n1\nmachine")).ok());
  std::thread rank0([&] {
    auto cfg = config(0, 2, SecurityMode::off, nullptr);
    cfg.options.connect_timeout = 1500ms;
    cfg.stranger_timeout = 300ms;
    t0 = make_tcp_transport(cfg, *store, pool);
  });
  auto silent = connect_tcp("127.0.0.1", port_of(*store, 0), Clock::now() + 10s, OnRefused::retry);
  ASSERT_TRUE(silent.ok());
  rank0.join();
  ASSERT_FALSE(t0.ok());
  EXPECT_EQ(t0.status().code(), ErrorCode::timeout) << t0.status().to_string();
  EXPECT_NE(t0.status().message().find("missing: rank(s) 1"), std::string::npos)
      << t0.status().message();
  EXPECT_NE(t0.status().message().find("did not identify itself"), std::string::npos)
      << t0.status().message();
}

// --- secured links ------------------------------------------------------------------------------

struct Layout {
  SecurityMode mode;
  bool separate_hosts;  // each rank its own host id: two sockets per pair, striped data
};

class TcpSecure : public ::testing::TestWithParam<Layout> {};

// Every pair exchanges messages from 0 bytes to 9 MiB (eager, rendezvous, several records per
// message); the receiver gets the bytes, the sender's buffer is unchanged.
TEST_P(TcpSecure, MessagesArriveIntactAndSendBuffersStayUntouched) {
  auto store = make_memory_store();
  BufferPool pool;
  const auto key = new_key();
  constexpr int kSize = 3;
  const Layout layout = GetParam();
  auto ts = make_all(*store, pool, kSize, [&](int r) {
    auto cfg = config(r, kSize, layout.mode, key,
                      layout.separate_hosts ? "host" + std::to_string(r) : "test");
    cfg.options.sockets_per_peer = 2;
    return cfg;
  });
  for (auto& t : ts) ASSERT_TRUE(t.ok()) << t.status().to_string();
  const std::vector<size_t> sizes = {0, 1, 8, 4096, 4097, 64 << 10, 1 << 20, (9 << 20) + 3};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int me = 0; me < kSize; ++me) {
    threads.emplace_back([&, me] {
      Transport& t = *ts[me].value();
      uint32_t tag = 0;
      for (size_t bytes : sizes) {
        ++tag;
        for (int step = 1; step < kSize; ++step) {
          const int to = (me + step) % kSize, from = (me - step + kSize) % kSize;
          std::vector<uint8_t> out(bytes), in(bytes, 0), copy;
          for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(i * 7 + me);
          copy = out;
          Request s;
  message(s, Request::Kind::send, to, tag, out.data(), bytes);
          Request r;
  message(r, Request::Kind::recv, from, tag, in.data(), bytes);
          Completion done;
          s.completion = &done;
          r.completion = &done;
          t.post_send(&s);
          t.post_recv(&r);
          const auto deadline = Completion::Clock::now() + 30s;
          while ((!s.done() || !r.done()) && Completion::Clock::now() < deadline) {
            uint32_t gen = done.generation();
            if (s.done() && r.done()) break;
            t.wait(done, gen, r.done() ? &s : &r, std::min(deadline, Completion::Clock::now() + 100ms));
          }
          bool ok = s.done() && r.done() && s.status.ok() && r.status.ok() && out == copy;
          for (size_t i = 0; ok && i < bytes; ++i) ok = in[i] == static_cast<uint8_t>(i * 7 + from);
          if (!ok) {
            ADD_FAILURE() << "rank " << me << " bytes " << bytes << " from " << from << ": "
                          << (r.done() ? r.status.to_string() : "recv pending") << " / "
                          << (s.done() ? s.status.to_string() : "send pending");
            ++failures;
            return;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  close_all(ts);
}

INSTANTIATE_TEST_SUITE_P(Modes, TcpSecure,
                         ::testing::Values(Layout{SecurityMode::encrypt, false},
                                           Layout{SecurityMode::encrypt, true},
                                           Layout{SecurityMode::auth, false},
                                           Layout{SecurityMode::auth, true}),
                         [](const auto& info) {
                           return std::string(security::to_string(info.param.mode)) +
                                  (info.param.separate_hosts ? "_two_sockets" : "_one_socket");
                         });

// An impostor with the store's contents but not the job key (its own static key, claiming rank
// 1) is refused at the handshake; the real rank 1 then joins and the job forms.
TEST(TcpSecureSetup, ImpostorWithTheStoreButNotTheKeyIsRefused) {
  auto store = make_memory_store();
  BufferPool pool;
  const auto key = new_key();
  Result<std::unique_ptr<Transport>> t0 = Status(ErrorCode::internal, "not run");
  std::thread rank0([&] { t0 = make_tcp_transport(config(0, 2, SecurityMode::encrypt, key), *store, pool); });
  // The impostor copies rank 0's record into its own store and runs as rank 1 with another key
  // and its own static key, at the same time as the real rank 1.
  auto impostor_store = make_memory_store();
  auto record0 = store->get_string("tcp/addr/0", 10s);
  ASSERT_TRUE(record0.ok());
  ASSERT_TRUE(impostor_store->set("tcp/addr/0", record0.value()).ok());
  Result<std::unique_ptr<Transport>> impostor = Status(ErrorCode::internal, "not run");
  std::thread fake([&] {
    auto cfg = config(1, 2, SecurityMode::encrypt, new_key());
    cfg.options.connect_timeout = 5s;
    impostor = make_tcp_transport(cfg, *impostor_store, pool);
  });
  // The impostor has published (in its own store) and connects first; rank 0 reads its message 1
  // once the real rank 1's record is there.
  ASSERT_TRUE(impostor_store->get_string("tcp/addr/1", 10s).ok());
  std::this_thread::sleep_for(200ms);
  auto t1 = make_tcp_transport(config(1, 2, SecurityMode::encrypt, key), *store, pool);
  fake.join();
  rank0.join();
  ASSERT_FALSE(impostor.ok());
  // Rank 0 dropped it (its static key is not the one rank 1 publishes): its handshake broke.
  EXPECT_NE(impostor.status().message().find("with rank 0"), std::string::npos)
      << impostor.status().to_string();
  ASSERT_TRUE(t0.ok()) << t0.status().to_string();
  ASSERT_TRUE(t1.ok()) << t1.status().to_string();
  std::vector<Result<std::unique_ptr<Transport>>> ts;
  ts.push_back(std::move(t0));
  ts.push_back(std::move(t1));
  close_all(ts);
}

// A rank with the wrong job key (its own record in the store, so its static key checks out):
// the psk fails on both sides; the initiator learns it from message 2, the acceptor never gets
// the confirmation and says so in its timeout.
TEST(TcpSecureSetup, WrongJobKeyFailsTheHandshakeOnBothSides) {
  auto store = make_memory_store();
  BufferPool pool;
  Result<std::unique_ptr<Transport>> t0 = Status(ErrorCode::internal, "not run");
  std::thread rank0([&] {
    auto cfg = config(0, 2, SecurityMode::encrypt, new_key());
    cfg.options.connect_timeout = 2s;
    cfg.stranger_timeout = 500ms;
    t0 = make_tcp_transport(cfg, *store, pool);
  });
  auto cfg1 = config(1, 2, SecurityMode::encrypt, new_key());
  cfg1.options.connect_timeout = 2s;
  auto t1 = make_tcp_transport(cfg1, *store, pool);
  rank0.join();
  ASSERT_FALSE(t1.ok());
  EXPECT_NE(t1.status().message().find("job key"), std::string::npos) << t1.status().to_string();
  ASSERT_FALSE(t0.ok());
  EXPECT_NE(t0.status().message().find("missing: rank(s) 1"), std::string::npos)
      << t0.status().to_string();
}

// Mixed settings are a clear configuration error, not a hang.
TEST(TcpSecureSetup, SecurityMismatchIsNamed) {
  auto store = make_memory_store();
  BufferPool pool;
  const auto key = new_key();
  auto ts = make_all(*store, pool, 2, [&](int r) {
    auto cfg = config(r, 2, r == 0 ? SecurityMode::encrypt : SecurityMode::off, r == 0 ? key : nullptr);
    cfg.options.connect_timeout = 3s;
    return cfg;
  });
  for (auto& t : ts) {
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("same security setting"), std::string::npos)
        << t.status().to_string();
  }
}

// --- a tampering proxy --------------------------------------------------------------------------

enum class Tamper { flip_header, flip_payload, replay, cut };

// Forwards rank 1 -> rank 0 and back; in the direction 1 -> 0 it changes the stream once `skip`
// bytes (the handshake and the confirmation) have passed, as `tamper` says, in the first frame
// after them: an eager message of `bytes` bytes.
class Proxy {
 public:
  Proxy(Tamper tamper, size_t skip, size_t bytes)
      : tamper_(tamper),
        skip_(skip),
        // Up to kInlinePayloadMax: one record, header || payload (4 + 72 + bytes + 16); above,
        // a header record (92 bytes) and a payload record (4 + bytes + 16).
        frame_(bytes <= tcp::kInlinePayloadMax ? 4 + 72 + bytes + 16 : 92 + 4 + bytes + 16),
        payload_at_(bytes <= tcp::kInlinePayloadMax ? 4 + 72 : 92 + 4) {
    auto l = listen_tcp("127.0.0.1", 0);
    EXPECT_TRUE(l.ok());
    listener_ = std::move(l.value());
    port_ = local_port(listener_.get()).value();
  }
  uint16_t port() const { return port_; }
  void start(uint16_t target) {
    thread_ = std::thread([this, target] { loop(target); });
  }
  ~Proxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop(uint16_t target) {
    auto a = accept_tcp(listener_.get(), Clock::now() + 20s);
    if (!a.ok()) return;
    auto b = connect_tcp("127.0.0.1", target, Clock::now() + 20s, OnRefused::retry);
    if (!b.ok()) return;
    Fd from1 = std::move(a.value()), to0 = std::move(b.value());
    std::vector<uint8_t> up;  // 1 -> 0 bytes after the handshake, tampered in one go
    size_t passed = 0;
    bool done = false;
    while (!stop_) {
      pollfd fds[2] = {{from1.get(), POLLIN, 0}, {to0.get(), POLLIN, 0}};
      if (::poll(fds, 2, 20) <= 0) continue;
      uint8_t buf[65536];
      if (fds[1].revents) {
        ssize_t n = ::recv(to0.get(), buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) (void)send_all(from1.get(), buf, static_cast<size_t>(n), Clock::now() + 5s);
        if (n == 0) ::shutdown(from1.get(), SHUT_WR);
      }
      if (fds[0].revents) {
        ssize_t n = ::recv(from1.get(), buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0) {
          if (n == 0) ::shutdown(to0.get(), SHUT_WR);
          continue;
        }
        size_t k = static_cast<size_t>(n), off = 0;
        if (passed < skip_) {
          off = std::min(k, skip_ - passed);
          (void)send_all(to0.get(), buf, off, Clock::now() + 5s);
          passed += off;
        }
        if (done) {
          (void)send_all(to0.get(), buf + off, k - off, Clock::now() + 5s);
          continue;
        }
        up.insert(up.end(), buf + off, buf + k);
        if (up.size() < frame_) continue;
        std::vector<uint8_t> out(up.begin(), up.begin() + static_cast<ptrdiff_t>(frame_));
        switch (tamper_) {
          case Tamper::flip_header: out[4 + 30] ^= 0x01; break;  // inside the header's body
          case Tamper::flip_payload: out[payload_at_ + 3] ^= 0x80; break;
          case Tamper::replay:  // the message, then its records again
            out.insert(out.end(), up.begin(), up.begin() + static_cast<ptrdiff_t>(frame_));
            break;
          case Tamper::cut:  // the last record loses its last tag byte; the stream goes on
            out.pop_back();
            break;
        }
        out.insert(out.end(), up.begin() + static_cast<ptrdiff_t>(frame_), up.end());
        (void)send_all(to0.get(), out.data(), out.size(), Clock::now() + 5s);
        done = true;
      }
    }
  }

  Tamper tamper_;
  size_t skip_;
  size_t frame_, payload_at_;
  Fd listener_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

class TcpSecureTamper : public ::testing::TestWithParam<std::tuple<Tamper, size_t>> {};

// Rank 1 sends a message (8 bytes: inline in the header record; 8 KiB: a payload record of its
// own) to rank 0 through the proxy (and, for the replay, a second
// receive waits for what would be the copy): rank 0's receive ends with a protocol error naming
// rank 1 and holds none of the message (replay: the first arrives, the copy does not), and rank
// 1's pending receive ends with rank 0's report of it.
TEST_P(TcpSecureTamper, TamperedRecordEndsTheLinkOnBothSides) {
  const auto [tamper, bytes] = GetParam();
  auto store0 = make_memory_store();
  auto store1 = make_memory_store();
  BufferPool pool;
  const auto key = new_key();
  // preamble + message 1 (8 + 120) + confirmation (20) pass untouched.
  Proxy proxy(tamper, 128 + 20, bytes);
  Result<std::unique_ptr<Transport>> t0 = Status(ErrorCode::internal, "not run");
  Result<std::unique_ptr<Transport>> t1 = Status(ErrorCode::internal, "not run");
  std::thread rank0([&] { t0 = make_tcp_transport(config(0, 2, SecurityMode::encrypt, key), *store0, pool); });
  // Rank 1 finds rank 0 at the proxy; rank 0 finds rank 1's record as it is.
  auto record0 = store0->get_string("tcp/addr/0", 10s);
  ASSERT_TRUE(record0.ok());
  std::string rewritten = record0.value();
  {
    std::istringstream in(rewritten);
    std::string host, ip, port, rest, line;
    std::getline(in, host);
    std::getline(in, ip);
    std::getline(in, port);
    while (std::getline(in, line)) rest += "\n" + line;
    proxy.start(static_cast<uint16_t>(std::stoi(port)));
    rewritten = host + "\n127.0.0.1\n" + std::to_string(proxy.port()) + rest;
  }
  ASSERT_TRUE(store1->set("tcp/addr/0", rewritten).ok());
  std::thread rank1([&] { t1 = make_tcp_transport(config(1, 2, SecurityMode::encrypt, key), *store1, pool); });
  auto record1 = store1->get_string("tcp/addr/1", 10s);
  ASSERT_TRUE(record1.ok());
  ASSERT_TRUE(store0->set("tcp/addr/1", record1.value()).ok());
  rank0.join();
  rank1.join();
  ASSERT_TRUE(t0.ok()) << t0.status().to_string();
  ASSERT_TRUE(t1.ok()) << t1.status().to_string();

  std::vector<uint8_t> out(bytes), first(bytes, 0), second(bytes, 0), zeros(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(0x11 + i * 7);
  uint64_t next = 7, back = 0;
  // Posted first, so the genuine message is delivered before the replay is read.
  Request r;
  message(r, Request::Kind::recv, 1, 5, first.data(), bytes);
  Completion c0;
  post(*t0.value(), r, c0);
  Request pending1;
  message(pending1, Request::Kind::recv, 0, 9, &back, sizeof(back));
  Completion c1;
  post(*t1.value(), pending1, c1);
  // Two messages: the second makes the cut record's stream go on.
  Request s;
  message(s, Request::Kind::send, 0, 5, out.data(), bytes);
  run(*t1.value(), s);
  Request s2;
  message(s2, Request::Kind::send, 0, 6, &next, sizeof(next));
  run(*t1.value(), s2);
  wait_done(*t0.value(), r);
  if (tamper == Tamper::replay) {
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(first, out);
    r.reset();
    r.buf = second.data();
    run(*t0.value(), r);
    EXPECT_EQ(second, zeros);
  } else {
    EXPECT_EQ(first, zeros);
  }
  EXPECT_EQ(r.status.code(), ErrorCode::protocol) << r.status.to_string();
  EXPECT_NE(r.status.message().find("from rank 1"), std::string::npos) << r.status.message();
  wait_done(*t1.value(), pending1);
  EXPECT_EQ(pending1.status.code(), ErrorCode::protocol) << pending1.status.to_string();
  EXPECT_NE(pending1.status.message().find("rank 0 reports"), std::string::npos)
      << pending1.status.message();
  EXPECT_EQ(back, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Tampering, TcpSecureTamper,
    ::testing::Combine(::testing::Values(Tamper::flip_header, Tamper::flip_payload, Tamper::replay,
                                         Tamper::cut),
                       ::testing::Values(size_t{8}, size_t{8192})),
    [](const auto& info) {
      const char* name = "";
      switch (std::get<0>(info.param)) {
        case Tamper::flip_header: name = "flip_header"; break;
        case Tamper::flip_payload: name = "flip_payload"; break;
        case Tamper::replay: name = "replay"; break;
        case Tamper::cut: name = "cut"; break;
      }
      return std::string(name) + "_" + std::to_string(std::get<1>(info.param));
    });

}  // namespace
}  // namespace weft
