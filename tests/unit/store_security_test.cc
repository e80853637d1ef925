// The TCP store under attack (issue 21): authentication with the job key (no key, a wrong key,
// replays within and across connections), and the bounds on what a client can make the server
// hold (frames, unread replies, connections, idle clients, stored data). Bounds are asserted on
// the server's own counters (TcpStoreStats), never on how fast a loaded machine is.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "core/link_security.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_auth.h"
#include "rendezvous/tcp_store_protocol.h"
#include "security/job_key.h"
#include "unit/raw_store_client.h"
#include "weft/communicator.h"
#include "weft/store.h"

namespace weft {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using tcp_store::Command;

constexpr milliseconds kLong(30000);

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// A private directory holding job key files, removed at the end.
class KeyFiles {
 public:
  KeyFiles() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "weft-keys-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  ~KeyFiles() { std::filesystem::remove_all(dir_); }
  // A fresh key in a new file; returns the path.
  std::string make(const std::string& name) {
    auto key = security::JobKey::generate();
    EXPECT_TRUE(key.ok());
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(security::write_job_key_file(path, key.value()).ok());
    return path;
  }

 private:
  std::string dir_;
};

std::unique_ptr<TcpStoreServer> start(const TcpStoreConfig& config) {
  auto server = TcpStoreServer::start("127.0.0.1", 0, config);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(server.value()) : nullptr;
}

// A server that authenticates with a fresh key; config.auth_key_file is the file clients need.
struct KeyedServer {
  KeyFiles keys;
  TcpStoreConfig config;
  std::unique_ptr<TcpStoreServer> server;

  KeyedServer() {
    config.auth_key_file = keys.make("job.key");
    server = start(config);
  }
};

using test::raw_connect;
using test::raw_reply;
using test::raw_send;
using test::server_closes;

// Polls (sleeping) until pred holds or kLong passes.
bool eventually(const std::function<bool()>& pred) {
  auto deadline = Clock::now() + kLong;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return pred();
}

// A hand-driven client: ping with a nonce, then (with a key) the session of tcp_store_auth.h.
struct RawClient {
  Fd fd;
  tcp_store::Nonce client_nonce{}, server_nonce{};
  bool auth = false;

  explicit RawClient(uint16_t port) : fd(raw_connect(port)) {
    tcp_store::Request ping;
    client_nonce = tcp_store::random_nonce().value();
    ping.nonce = client_nonce;
    EXPECT_TRUE(raw_send(fd, tcp_store::encode_request(ping)).ok());
    Result<tcp_store::Reply> r = raw_reply(fd, Command::ping);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) {
      auth = r->auth;
      server_nonce = r->nonce;
    }
  }
};

tcp_store::Request set_request(const std::string& key, const std::string& value) {
  tcp_store::Request req;
  req.command = Command::set;
  req.key = key;
  req.value = Bytes(value.begin(), value.end());
  return req;
}

security::JobKey key_of(const std::string& path) {
  return security::read_job_key_file(path).value();
}

Bytes seal(tcp_store::Session& s, const Bytes& frame) {
  Bytes out(security::sealed_size(frame.size()));
  EXPECT_TRUE(s.sealer.seal(frame, out).ok());
  return out;
}

// ---- authentication ------------------------------------------------------------------------

TEST(StoreAuthTest, ClientsWithTheKeyUseTheStoreAsBefore) {
  KeyedServer keyed;
  auto& config = keyed.config;
  auto& server = keyed.server;
  auto a = connect_tcp_store("127.0.0.1", server->port(), kLong, config.auth_key_file);
  auto b = connect_tcp_store("127.0.0.1", server->port(), kLong, config.auth_key_file);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  std::thread waiter([&] { EXPECT_EQ(b.value()->get_string("addr/1", kLong).value(), "here"); });
  ASSERT_TRUE(a.value()->set("addr/1", "here").ok());
  waiter.join();
  EXPECT_EQ(a.value()->add("n", 5).value(), 5);
  auto many = b.value()->multi_get({"addr/1", "n"}, kLong);
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  EXPECT_EQ(many->size(), 2u);
  EXPECT_TRUE(a.value()->check({"addr/1"}).value());
  EXPECT_TRUE(a.value()->erase("addr/1").ok());
  EXPECT_EQ(server->stats().rejected_unauthenticated, 0u);
}

TEST(StoreAuthTest, ClientWithoutTheKeyCanNeitherReadNorWrite) {
  KeyedServer keyed;
  auto& config = keyed.config;
  auto& server = keyed.server;
  auto good = connect_tcp_store("127.0.0.1", server->port(), kLong, config.auth_key_file);
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(good.value()->set("secret", "s3").ok());

  // The library's client says why.
  auto keyless = connect_tcp_store("127.0.0.1", server->port(), milliseconds(2000));
  ASSERT_FALSE(keyless.ok());
  EXPECT_EQ(keyless.status().code(), ErrorCode::protocol);
  EXPECT_TRUE(Contains(keyless.status().message(), "requires the job key"));

  // A hand-made client that ignores the auth flag and sends its get and its set with a forged
  // MAC (16 zero bytes after the frame): refused unanswered.
  for (Command command : {Command::get, Command::set}) {
    RawClient raw(server->port());
    EXPECT_TRUE(raw.auth);
    tcp_store::Request req = set_request("secret", "overwritten");
    if (command == Command::get) {
      req.command = command;
      req.value.clear();
    }
    Bytes forged = tcp_store::encode_request(req);
    forged.resize(forged.size() + security::kTagBytes, 0);
    ASSERT_TRUE(raw_send(raw.fd, forged).ok());
    EXPECT_TRUE(server_closes(raw.fd));
  }
  // A first frame that is not a ping.
  Fd direct = raw_connect(server->port());
  ASSERT_TRUE(raw_send(direct, tcp_store::encode_request(set_request("secret", "x"))).ok());
  EXPECT_TRUE(server_closes(direct));

  EXPECT_GE(server->stats().rejected_unauthenticated, 3u);
  EXPECT_EQ(good.value()->get_string("secret", kLong).value(), "s3");
}

TEST(StoreAuthTest, AnotherJobsKeyIsRefused) {
  KeyFiles keys;
  TcpStoreConfig config;
  config.auth_key_file = keys.make("job.key");
  const std::string other = keys.make("other.key");
  auto server = start(config);
  auto wrong = connect_tcp_store("127.0.0.1", server->port(), milliseconds(2000), other);
  ASSERT_TRUE(wrong.ok()) << wrong.status().to_string();  // the ping carries no MAC
  EXPECT_FALSE(wrong.value()->set("k", "v").ok());
  EXPECT_GE(server->stats().rejected_unauthenticated, 1u);
  auto good = connect_tcp_store("127.0.0.1", server->port(), kLong, config.auth_key_file);
  EXPECT_FALSE(good.value()->check({"k"}).value());
}

TEST(StoreAuthTest, ClientWithAKeyRefusesAStoreWithout) {
  KeyFiles keys;
  auto server = start(TcpStoreConfig());
  auto c = connect_tcp_store("127.0.0.1", server->port(), milliseconds(2000), keys.make("k"));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status().message(), "does not authenticate"));
}

TEST(StoreAuthTest, RecordedRequestsCannotBeReplayed) {
  KeyedServer keyed;
  auto& config = keyed.config;
  auto& server = keyed.server;
  const security::JobKey key = key_of(config.auth_key_file);

  RawClient first(server->port());
  ASSERT_TRUE(first.auth);
  auto session = tcp_store::make_session(key, false, first.client_nonce, first.server_nonce, "t");
  ASSERT_TRUE(session.ok());
  const Bytes recorded = seal(session.value(), tcp_store::encode_request(set_request("k", "1")));
  ASSERT_TRUE(raw_send(first.fd, recorded).ok());
  uint8_t reply[64];
  ASSERT_TRUE(recv_all(first.fd.get(), reply, tcp_store::kLengthBytes + 1 +
                                                  security::kRecordOverhead,
                       Clock::now() + kLong)
                  .ok());  // the set's ok reply, sealed
  // Within the connection: the counter has moved on.
  ASSERT_TRUE(raw_send(first.fd, recorded).ok());
  EXPECT_TRUE(server_closes(first.fd));
  // On another connection: other nonces, other keys.
  RawClient second(server->port());
  ASSERT_TRUE(raw_send(second.fd, recorded).ok());
  EXPECT_TRUE(server_closes(second.fd));
  EXPECT_EQ(server->stats().rejected_unauthenticated, 2u);
}

// ---- bounds ----------------------------------------------------------------------------------

TEST(StoreBoundsTest, HugeAndHalfSentFramesCostAtMostOneFrameEach) {
  // Was: 16 half-sent 64 MiB frames took the server to 1 GB.
  auto server = start(TcpStoreConfig());
  std::vector<Fd> huge, half;
  for (int i = 0; i < 16; ++i) {
    huge.push_back(raw_connect(server->port()));
    Bytes frame = {0, 0, 0, 4, static_cast<uint8_t>(Command::set)};  // 64 MiB announced
    ASSERT_TRUE(raw_send(huge.back(), frame).ok());
  }
  for (auto& fd : huge) EXPECT_TRUE(server_closes(fd));
  const size_t half_bytes = tcp_store::kMaxValueBytes / 2;
  for (int i = 0; i < 16; ++i) {
    half.push_back(raw_connect(server->port()));
    tcp_store::Request req = set_request("k", std::string(tcp_store::kMaxValueBytes, 'x'));
    Bytes frame = tcp_store::encode_request(req);
    frame.resize(half_bytes);
    ASSERT_TRUE(raw_send(half.back(), frame).ok());
  }
  ASSERT_TRUE(eventually([&] { return server->stats().buffered_bytes >= 8 * half_bytes; }));
  EXPECT_LE(server->stats().peak_buffered_bytes, 16 * (half_bytes + (64 << 10)));
}

TEST(StoreBoundsTest, UnreadRepliesAreCappedAndTheirClientsDropped) {
  // Was: one 64 MiB value and 80 unread gets took the server to 5 GB for 14 s.
  TcpStoreConfig config;
  config.max_buffered_bytes = size_t{8} << 20;
  config.stall_timeout = milliseconds(500);
  auto server = start(config);
  auto client = connect_tcp_store("127.0.0.1", server->port(), kLong);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.value()->set("big", Bytes(tcp_store::kMaxValueBytes, 7)).ok());
  std::vector<Fd> readers;
  tcp_store::Request get;
  get.command = Command::get;
  get.key = "big";
  for (int i = 0; i < 80; ++i) {
    readers.push_back(raw_connect(server->port()));
    int small = 4096;  // keep the kernel from absorbing the replies
    ::setsockopt(readers.back().get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ASSERT_TRUE(raw_send(readers.back(), tcp_store::encode_request(get)).ok());
  }
  // Another client is served meanwhile.
  ASSERT_TRUE(client.value()->set("small", "v").ok());
  EXPECT_EQ(client.value()->get_string("small", kLong).value(), "v");
  ASSERT_TRUE(eventually([&] { return server->stats().dropped_stalled >= 1; }));
  const TcpStoreStats s = server->stats();
  EXPECT_GE(s.refused_busy, 1u);
  EXPECT_LE(s.peak_buffered_bytes, config.max_buffered_bytes + 2 * tcp_store::kMaxPayloadBytes);
}

TEST(StoreBoundsTest, IdleConnectionsCannotLockOutNewClients) {
  // Was: 600 idle connections under `ulimit -n 256` locked out new clients.
  TcpStoreConfig config;
  config.max_connections = 16;
  auto server = start(config);
  std::vector<Fd> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(raw_connect(server->port()));
  auto client = connect_tcp_store("127.0.0.1", server->port(), kLong);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE(client.value()->set("k", "v").ok());
  EXPECT_LE(server->stats().connections, 16u);
  EXPECT_GE(server->stats().evicted, 24u);
}

TEST(StoreBoundsTest, IdleClientsAreClosedAndPooledConnectionsReplaced) {
  TcpStoreConfig config;
  config.idle_timeout = milliseconds(200);
  auto server = start(config);
  auto client = connect_tcp_store("127.0.0.1", server->port(), kLong);
  ASSERT_TRUE(client.value()->set("k", "v").ok());
  Fd idle = raw_connect(server->port());
  EXPECT_TRUE(server_closes(idle));
  ASSERT_TRUE(eventually([&] { return server->stats().dropped_idle >= 2; }));
  EXPECT_EQ(client.value()->get_string("k", kLong).value(), "v");  // on a fresh connection
}

TEST(StoreBoundsTest, StoredDataIsBounded) {
  TcpStoreConfig config;
  config.max_data_bytes = 4096;
  auto server = start(config);
  auto client = connect_tcp_store("127.0.0.1", server->port(), kLong);
  ASSERT_TRUE(client.value()->set("a", Bytes(3000)).ok());
  Status full = client.value()->set("b", Bytes(3000));
  EXPECT_FALSE(full.ok());
  EXPECT_TRUE(Contains(full.message(), "full"));
  ASSERT_TRUE(client.value()->set("a", Bytes(10)).ok());  // replacing frees the old value
  EXPECT_TRUE(client.value()->set("b", Bytes(3000)).ok());
  EXPECT_LE(server->stats().data_bytes, 4096u);
}

// ---- jobs kept apart ------------------------------------------------------------------------

// One job of `size` ranks (threads) on the given store server, under job id `job`: each rank
// allgathers marker*100 + rank and returns what it saw (every rank's value, or -1 on error).
std::vector<std::vector<int32_t>> run_job(uint16_t port, const std::string& job, int size,
                                          int32_t marker,
                                          std::shared_ptr<const security::JobKey> key) {
  std::vector<std::vector<int32_t>> seen(static_cast<size_t>(size));
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.emplace_back([&, r] {
      LaunchInfo info;
      info.rank = r;
      info.size = size;
      info.store_host = "127.0.0.1";
      info.store_port = port;
      info.job_id = job;
      auto store = open_launch_store(info, kLong, nullptr, key);
      ASSERT_TRUE(store.ok()) << store.status().to_string();
      Options o;
      o.rank = r;
      o.size = size;
      o.transport = TransportKind::tcp;
      auto comm = Communicator::create(o, store.value());
      ASSERT_TRUE(comm.ok()) << comm.status().to_string();
      int32_t mine = marker * 100 + r;
      std::vector<int32_t> all(static_cast<size_t>(size), -1);
      ASSERT_TRUE(comm.value()->allgather(&mine, all.data(), 1, DataType::int32).ok());
      seen[static_cast<size_t>(r)] = all;
      EXPECT_TRUE(comm.value()->shutdown().ok());
    });
  }
  for (auto& t : ranks) t.join();
  return seen;
}

std::vector<int32_t> expected(int size, int32_t marker) {
  std::vector<int32_t> v;
  for (int r = 0; r < size; ++r) v.push_back(marker * 100 + r);
  return v;
}

TEST(StoreNamespaceTest, TwoConcurrentJobsOnOneStoreEachSeeOnlyTheirOwnRanks) {
  KeyedServer keyed;  // one store and one key file shared by two jobs
  auto& config = keyed.config;
  auto& server = keyed.server;
  auto key = std::make_shared<const security::JobKey>(key_of(config.auth_key_file));
  std::vector<std::vector<int32_t>> a, b;
  std::thread job_a([&] { a = run_job(server->port(), "alpha", 3, 1, key); });
  std::thread job_b([&] { b = run_job(server->port(), "beta", 2, 2, key); });
  job_a.join();
  job_b.join();
  for (const auto& s : a) EXPECT_EQ(s, expected(3, 1));
  for (const auto& s : b) EXPECT_EQ(s, expected(2, 2));
}

TEST(StoreNamespaceTest, AReusedStoreNeverHandsAJobTheAddressesOfAnEarlierOne) {
  auto server = start(TcpStoreConfig());
  // The same job size twice on one store, one after the other: each under its own namespace.
  for (const auto& s : run_job(server->port(), "first", 2, 1, nullptr)) {
    EXPECT_EQ(s, expected(2, 1));
  }
  for (const auto& s : run_job(server->port(), "second", 2, 2, nullptr)) {
    EXPECT_EQ(s, expected(2, 2));
  }
  // And the key-derived namespace differs per key.
  auto k1 = security::JobKey::generate().value();
  auto k2 = security::JobKey::generate().value();
  EXPECT_NE(job_namespace("", &k1), job_namespace("", &k2));
  EXPECT_EQ(job_namespace("", &k1), job_namespace("", &k1));
  EXPECT_EQ(job_namespace("x", &k1), "job/x");
  EXPECT_EQ(job_namespace("", nullptr), "");
}

TEST(LaunchKeyTest, JobIdsAreCheckedAtTheEdge) {
  EnvMap env{{"WEFT_RANK", "0"}, {"WEFT_SIZE", "1"}, {"WEFT_STORE_ADDR", "127.0.0.1:1"},
             {"WEFT_JOB_ID", "train-7.a"}};
  EXPECT_EQ(detect_launch(env)->job_id, "train-7.a");
  env["WEFT_JOB_ID"] = "../../other";
  EXPECT_EQ(detect_launch(env).status().code(), ErrorCode::invalid_argument);
}

// ---- the key at the launch edge ------------------------------------------------------------

TEST(LaunchKeyTest, BootstrapReadsTheKeyFileVariable) {
  KeyFiles keys;
  const std::string path = keys.make("job.key");
  auto info = detect_launch(
      {{"WEFT_RANK", "0"}, {"WEFT_SIZE", "1"}, {"WEFT_STORE_ADDR", "127.0.0.1:1"},
       {"WEFT_AUTH_KEY_FILE", path}});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->auth_key_file, path);
  auto key = read_launch_key(info.value());
  ASSERT_TRUE(key.ok());
  EXPECT_NE(key.value(), nullptr);
  info->auth_key_file = path + ".missing";
  EXPECT_FALSE(read_launch_key(info.value()).ok());
  info->auth_key_file.clear();
  EXPECT_EQ(read_launch_key(info.value()).value(), nullptr);
}

TEST(LaunchKeyTest, SecurityModeDefaultsToEncryptWithAKeyAndOffWithout) {
  auto key = std::make_shared<const security::JobKey>(security::JobKey::generate().value());
  EXPECT_EQ(resolve_link_security(Security::automatic, key, false)->mode, Security::encrypt);
  EXPECT_EQ(resolve_link_security(Security::automatic, nullptr, false)->mode, Security::off);
  EXPECT_EQ(resolve_link_security(Security::auth, key, false)->mode, Security::auth);
  EXPECT_EQ(resolve_link_security(Security::off, key, false)->mode, Security::off);
  auto missing = resolve_link_security(Security::encrypt, nullptr, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "WEFT_AUTH_KEY_FILE"));
}

}  // namespace
}  // namespace weft
