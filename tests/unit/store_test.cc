// Store conformance tests, run against every Store kind (memory, file, tcp, prefix), plus the
// TCP store's wire protocol, server table, and behaviour under hostile or absent peers.
#include "weft/store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "rendezvous/file_store.h"
#include "base/socket.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_table.h"
#include "unit/raw_store_client.h"

namespace weft {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Generous: tests must pass on a loaded 2-core CI machine.
constexpr milliseconds kLong(30000);
constexpr milliseconds kSlack(5000);

// gtest only (the unit binary does not link gmock).
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// One store under test. client() gives another handle to the same data, as a separate rank
// would have (a new TCP connection, a new file store on the same directory, ...).
class Harness {
 public:
  virtual ~Harness() = default;
  virtual std::shared_ptr<Store> client() = 0;
};

class MemoryHarness : public Harness {
 public:
  std::shared_ptr<Store> client() override { return store_; }

 private:
  std::shared_ptr<Store> store_ = make_memory_store();
};

class FileHarness : public Harness {
 public:
  FileHarness() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "weft-store-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  ~FileHarness() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::shared_ptr<Store> client() override {
    Result<std::shared_ptr<Store>> s = make_file_store(dir_ + "/store");
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? s.value() : nullptr;
  }

 private:
  std::string dir_;
};

class TcpHarness : public Harness {
 public:
  TcpHarness() {
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    EXPECT_TRUE(server.ok()) << server.status().to_string();
    if (server.ok()) server_ = std::move(server.value());
  }
  std::shared_ptr<Store> client() override {
    if (!server_) return nullptr;
    auto s = connect_tcp_store("127.0.0.1", server_->port(), kLong);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? s.value() : nullptr;
  }
  uint16_t port() const { return server_->port(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

class PrefixHarness : public Harness {
 public:
  std::shared_ptr<Store> client() override { return make_prefix_store("job7", inner_); }
  std::shared_ptr<Store> inner() { return inner_; }

 private:
  std::shared_ptr<Store> inner_ = make_memory_store();
};

struct Kind {
  const char* name;
  std::unique_ptr<Harness> (*make)();
};

const Kind kKinds[] = {
    {"memory", [] { return std::unique_ptr<Harness>(new MemoryHarness); }},
    {"file", [] { return std::unique_ptr<Harness>(new FileHarness); }},
    {"tcp", [] { return std::unique_ptr<Harness>(new TcpHarness); }},
    {"prefix", [] { return std::unique_ptr<Harness>(new PrefixHarness); }},
};

class StoreKindTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    store_ = harness_->client();
    ASSERT_NE(store_, nullptr);
  }
  std::unique_ptr<Harness> harness_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreKindTest, SetThenGetReturnsTheValueAndSetReplaces) {
  ASSERT_TRUE(store_->set("alpha", "one").ok());
  Result<std::string> v = store_->get_string("alpha", kLong);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v.value(), "one");
  ASSERT_TRUE(store_->set("alpha", "two").ok());
  EXPECT_EQ(store_->get_string("alpha", kLong).value(), "two");
  // Another handle (another rank) sees the same data.
  EXPECT_EQ(harness_->client()->get_string("alpha", kLong).value(), "two");
}

TEST_P(StoreKindTest, EmptyAndBinaryValuesAndUnusualKeysRoundTrip) {
  Bytes binary = {0, 1, 0, 255, '/', 0};
  const std::vector<std::string> keys = {"",
                                         "a/b",
                                         "a%2Fb",
                                         "..",
                                         "../../etc/passwd",
                                         std::string("nul\0key", 7),
                                         "sp ace",
                                         "\xc3\xa9t\xc3\xa9",
                                         std::string(300, 'x'),
                                         std::string(301, 'x')};
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(store_->set(keys[i], "v" + std::to_string(i)).ok()) << i;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(store_->get_string(keys[i], kLong).value(), "v" + std::to_string(i)) << i;
  }
  ASSERT_TRUE(store_->set("bin", binary).ok());
  EXPECT_EQ(store_->get("bin", kLong).value(), binary);
  ASSERT_TRUE(store_->set("empty", Bytes{}).ok());
  Result<Bytes> empty = store_->get("empty", kLong);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_P(StoreKindTest, GetWaitsForASetFromAnotherThread) {
  auto other = harness_->client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(other->set("late", "here").ok());
  });
  Result<std::string> v = store_->get_string("late", kLong);
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v.value(), "here");
}

TEST_P(StoreKindTest, GetTimesOutWithinBoundedTime) {
  const milliseconds t(300);
  auto start = Clock::now();
  Result<Bytes> v = store_->get("never", t);
  auto elapsed = Clock::now() - start;
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), ErrorCode::timeout) << v.status().to_string();
  EXPECT_TRUE(Contains(v.status().message(), "never"));
  EXPECT_GE(elapsed, t);
  EXPECT_LE(elapsed, t + kSlack);
}

TEST_P(StoreKindTest, ZeroTimeoutGetOfMissingKeyFailsAtOnce) {
  auto start = Clock::now();
  Result<Bytes> v = store_->get("missing", milliseconds(0));
  EXPECT_EQ(v.status().code(), ErrorCode::timeout);
  EXPECT_LE(Clock::now() - start, kSlack);
  ASSERT_TRUE(store_->set("present", "x").ok());
  EXPECT_TRUE(store_->get("present", milliseconds(0)).ok());
}

TEST_P(StoreKindTest, AddFromManyThreadsIsAtomic) {
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto s = harness_->client();
      for (int i = 0; i < kAdds; ++i) {
        Result<int64_t> r = s->add("counter", 1);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        seen[t].push_back(r.value());
      }
    });
  }
  for (auto& th : threads) th.join();
  // Every add returned a distinct value: together exactly 1..N.
  std::set<int64_t> all;
  for (auto& v : seen) all.insert(v.begin(), v.end());
  ASSERT_EQ(all.size(), size_t{kThreads * kAdds});
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
  EXPECT_EQ(store_->get_string("counter", kLong).value(), std::to_string(kThreads * kAdds));
}

TEST_P(StoreKindTest, AddStartsAtZeroTakesNegativesAndRejectsNonIntegers) {
  EXPECT_EQ(store_->add("n", 5).value(), 5);
  EXPECT_EQ(store_->add("n", -7).value(), -2);
  EXPECT_EQ(store_->add("n", 0).value(), -2);
  ASSERT_TRUE(store_->set("m", "41").ok());
  EXPECT_EQ(store_->add("m", 1).value(), 42);
  ASSERT_TRUE(store_->set("text", "hello").ok());
  Result<int64_t> r = store_->add("text", 1);
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(Contains(r.status().message(), "not a decimal integer"));
  ASSERT_TRUE(store_->set("big", std::to_string(INT64_MAX)).ok());
  EXPECT_EQ(store_->add("big", 1).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(store_->get_string("big", kLong).value(), std::to_string(INT64_MAX));
}

TEST_P(StoreKindTest, WaitAndCheck) {
  EXPECT_TRUE(store_->check({}).value());
  EXPECT_FALSE(store_->check({"w1", "w2"}).value());
  Status early = store_->wait({"w1", "w2"}, milliseconds(100));
  EXPECT_EQ(early.code(), ErrorCode::timeout) << early.to_string();
  auto other = harness_->client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(other->set("w2", "b").ok());
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(other->set("w1", "a").ok());
  });
  Status s = store_->wait({"w1", "w2"}, kLong);
  setter.join();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(store_->check({"w1", "w2"}).value());
  EXPECT_TRUE(store_->wait({"w1"}, milliseconds(0)).ok());
}

TEST_P(StoreKindTest, MultiGetReturnsValuesInKeyOrderOnceAllExist) {
  EXPECT_TRUE(store_->multi_get({}, milliseconds(0)).value().empty());
  ASSERT_TRUE(store_->set("m2", "two").ok());
  auto early = store_->multi_get({"m1", "m2"}, milliseconds(100));
  EXPECT_EQ(early.status().code(), ErrorCode::timeout) << early.status().to_string();
  auto other = harness_->client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(other->set("m3", Bytes{0, 255}).ok());
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(other->set("m1", "").ok());
  });
  auto values = store_->multi_get({"m3", "m1", "m2", "m3"}, kLong);
  setter.join();
  ASSERT_TRUE(values.ok()) << values.status().to_string();
  EXPECT_EQ(values.value(), (std::vector<Bytes>{Bytes{0, 255}, Bytes{}, Bytes{'t', 'w', 'o'},
                                                Bytes{0, 255}}));
}

TEST_P(StoreKindTest, WaitTimesOutWithinBoundedTime) {
  ASSERT_TRUE(store_->set("have", "1").ok());
  const milliseconds t(250);
  auto start = Clock::now();
  Status s = store_->wait({"have", "lack"}, t);
  auto elapsed = Clock::now() - start;
  EXPECT_EQ(s.code(), ErrorCode::timeout) << s.to_string();
  EXPECT_GE(elapsed, t);
  EXPECT_LE(elapsed, t + kSlack);
}

TEST_P(StoreKindTest, EraseRemovesTheKeyAndToleratesMissingKeys) {
  ASSERT_TRUE(store_->set("gone", "x").ok());
  EXPECT_TRUE(store_->check({"gone"}).value());
  EXPECT_TRUE(store_->erase("gone").ok());
  EXPECT_FALSE(store_->check({"gone"}).value());
  EXPECT_EQ(store_->get("gone", milliseconds(0)).status().code(), ErrorCode::timeout);
  EXPECT_TRUE(store_->erase("gone").ok());
  EXPECT_TRUE(store_->erase("never-set").ok());
  EXPECT_EQ(store_->add("gone", 3).value(), 3);  // counts from zero again
}

TEST_P(StoreKindTest, LargeValuesRoundTrip) {
  const Bytes big = random_bytes(tcp_store::kMaxValueBytes, 7);  // the TCP store's limit
  ASSERT_TRUE(store_->set("big", big).ok());
  Result<Bytes> v = harness_->client()->get("big", kLong);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v.value() == big);
}

TEST_P(StoreKindTest, ManyWaitersAreAllWokenBySet) {
  constexpr int kWaiters = 16;
  std::vector<std::thread> threads;
  std::atomic<int> woken{0};
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      auto s = harness_->client();
      Result<std::string> v = s->get_string("go", kLong);
      if (v.ok() && v.value() == "now") woken++;
    });
  }
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(store_->set("go", "now").ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken.load(), kWaiters);
}

INSTANTIATE_TEST_SUITE_P(Store, StoreKindTest, ::testing::ValuesIn(kKinds),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(StorePrefixTest, KeysAreNamespacedInTheInnerStore) {
  auto inner = make_memory_store();
  auto a = make_prefix_store("a", inner);
  auto b = make_prefix_store("b", inner);
  ASSERT_TRUE(a->set("k", "from a").ok());
  ASSERT_TRUE(b->set("k", "from b").ok());
  EXPECT_EQ(inner->get_string("a/k", kLong).value(), "from a");
  EXPECT_EQ(inner->get_string("b/k", kLong).value(), "from b");
  EXPECT_TRUE(a->check({"k"}).value());
  EXPECT_FALSE(a->check({"a/k"}).value());
  EXPECT_TRUE(make_prefix_store("x", a)->set("y", "z").ok());
  EXPECT_EQ(inner->get_string("a/x/y", kLong).value(), "z");
}

TEST(StoreFileTest, KeyFileNamesStayInsideTheDirectory) {
  for (const std::string& key :
       std::vector<std::string>{"", ".", "..", "../x", "/abs", "a/b", std::string("\0", 1), "%41",
                                std::string(5000, '/')}) {
    std::string name = file_name_for_key(key);
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_NE(name, ".");
    EXPECT_NE(name, "..");
    EXPECT_LE(name.size(), kMaxPlainNameBytes + 2);
    EXPECT_TRUE(name.rfind("k_", 0) == 0 || name.rfind("h_", 0) == 0) << name;
  }
  EXPECT_EQ(file_name_for_key("rank.0_addr-x"), "k_rank.0_addr-x");
  EXPECT_NE(file_name_for_key("a/b"), file_name_for_key("a%2Fb"));
  EXPECT_NE(file_name_for_key(std::string(400, 'a')), file_name_for_key(std::string(401, 'a')));
}

TEST(StoreFileTest, RejectsAnUnusableDirectory) {
  EXPECT_EQ(make_file_store("").status().code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(make_file_store("/proc/self/status/x").ok());
}

// ---- TCP store: many clients, absent servers, hostile peers --------------------------------

// Raw connections that speak (or mangle) the protocol by hand: raw_store_client.h.
using test::raw_connect;
using test::raw_reply;
using test::raw_send;
using test::server_closes;

// A port that nothing listens on right now (bound by a server that is gone again).
uint16_t free_port() {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok());
  return server.ok() ? server.value()->port() : 0;
}

TEST(StoreTcpTest, ManyConcurrentClientsRendezvous) {
  TcpHarness h;
  constexpr int kClients = 32;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto s = h.client();
      ASSERT_NE(s, nullptr);
      ASSERT_TRUE(s->add("joined", 1).ok());
      ASSERT_TRUE(s->set("rank/" + std::to_string(i), std::to_string(i * i)).ok());
      std::vector<std::string> keys;
      for (int j = 0; j < kClients; ++j) keys.push_back("rank/" + std::to_string(j));
      ASSERT_TRUE(s->wait(keys, kLong).ok());
      for (int j = 0; j < kClients; ++j) {
        ASSERT_EQ(s->get_string(keys[j], kLong).value(), std::to_string(j * j));
      }
      good++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kClients);
  EXPECT_EQ(h.client()->get_string("joined", kLong).value(), std::to_string(kClients));
}

TEST(StoreTcpTest, OneClientServesThreadsThatWaitAndSetAtOnce) {
  // A get parked in one thread must not hold up a set from another thread on the same client.
  TcpHarness h;
  auto s = h.client();
  std::thread waiter([&] { EXPECT_EQ(s->get_string("k", kLong).value(), "v"); });
  std::this_thread::sleep_for(milliseconds(100));
  auto start = Clock::now();
  ASSERT_TRUE(s->set("k", "v").ok());
  waiter.join();
  EXPECT_LE(Clock::now() - start, kSlack);
}

TEST(StoreTcpTest, ConnectRetriesUntilTheServerStarts) {
  const uint16_t port = free_port();
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto s = TcpStoreServer::start("127.0.0.1", port);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server = std::move(s.value());
  });
  Result<std::shared_ptr<Store>> client = connect_tcp_store("127.0.0.1", port, kLong);
  starter.join();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE(client.value()->set("a", "b").ok());
  EXPECT_EQ(client.value()->get_string("a", kLong).value(), "b");
}

TEST(StoreTcpTest, ConnectTimesOutNamingTheAddress) {
  const uint16_t port = free_port();
  const milliseconds t(300);
  auto start = Clock::now();
  Result<std::shared_ptr<Store>> client = connect_tcp_store("127.0.0.1", port, t);
  auto elapsed = Clock::now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), ErrorCode::timeout);
  EXPECT_TRUE(Contains(client.status().message(), "127.0.0.1:" + std::to_string(port)));
  EXPECT_GE(elapsed, t);
  EXPECT_LE(elapsed, t + kSlack);
}

TEST(StoreTcpTest, ClientRejectsOversizedArgumentsWithoutSending) {
  TcpHarness h;
  auto s = h.client();
  Status key = s->set(std::string(tcp_store::kMaxKeyBytes + 1, 'k'), "v");
  EXPECT_EQ(key.code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(Contains(key.message(), "127.0.0.1:"));
  Status value = s->set("k", Bytes(tcp_store::kMaxValueBytes + 1));
  EXPECT_EQ(value.code(), ErrorCode::invalid_argument);
  std::vector<std::string> many(tcp_store::kMaxKeysPerRequest + 1, "x");
  EXPECT_EQ(s->check(many).status().code(), ErrorCode::invalid_argument);
  std::vector<std::string> heavy(20000, std::string(4000, 'h'));  // 80 MB of keys
  EXPECT_EQ(s->wait(heavy, milliseconds(0)).code(), ErrorCode::invalid_argument);
  ASSERT_TRUE(s->set("still", "fine").ok());  // the connection is unharmed
  EXPECT_EQ(s->get_string("still", kLong).value(), "fine");
}

TEST(StoreTcpTest, BadFramesCloseOnlyThatClient) {
  TcpHarness h;
  auto good = h.client();
  ASSERT_TRUE(good->set("before", "1").ok());
  const std::vector<Bytes> garbage = {
      bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),        // another protocol
      Bytes{0xff, 0xff, 0xff, 0xff, 2},                     // 4 GiB frame
      Bytes{0, 0, 0, 0},                                    // empty frame
      Bytes{1, 0, 0, 0, 99},                                // unknown command
      Bytes{5, 0, 0, 0, 3, 9, 9, 0, 0},                     // get whose key overruns the frame
      Bytes{9, 0, 0, 0, 1, 'X', 'X', 'X', 'X', 1, 0, 0, 0}  // ping with a bad magic
  };
  for (const Bytes& g : garbage) {
    Fd fd = raw_connect(h.port());
    ASSERT_TRUE(raw_send(fd, g).ok());
    EXPECT_TRUE(server_closes(fd)) << "garbage of " << g.size() << " bytes";
  }
  EXPECT_EQ(good->get_string("before", kLong).value(), "1");
  ASSERT_TRUE(good->set("after", "2").ok());
  EXPECT_EQ(h.client()->get_string("after", kLong).value(), "2");
}

TEST(StoreTcpTest, PipelinedRequestsAreAnsweredInOrder) {
  TcpHarness h;
  Fd fd = raw_connect(h.port());
  tcp_store::Request set, get, add;
  set.command = tcp_store::Command::set;
  set.key = "p";
  set.value = bytes_of("q");
  get.command = tcp_store::Command::get;
  get.key = "p";
  get.timeout_ms = 1000;
  add.command = tcp_store::Command::add;
  add.key = "n";
  add.delta = 9;
  Bytes all;
  for (const auto* r : {&set, &get, &add}) {
    Bytes f = tcp_store::encode_request(*r);
    all.insert(all.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(raw_send(fd, all).ok());
  EXPECT_EQ(raw_reply(fd, tcp_store::Command::set)->code, tcp_store::ReplyCode::ok);
  EXPECT_EQ(raw_reply(fd, tcp_store::Command::get)->value, bytes_of("q"));
  EXPECT_EQ(raw_reply(fd, tcp_store::Command::add)->integer, 9);
}

TEST(StoreTcpTest, VersionMismatchIsRejectedWithAReason) {
  TcpHarness h;
  Fd fd = raw_connect(h.port());
  tcp_store::Request ping;
  ping.version = 99;
  ASSERT_TRUE(raw_send(fd, tcp_store::encode_request(ping)).ok());
  Result<tcp_store::Reply> r = raw_reply(fd, tcp_store::Command::ping);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->code, tcp_store::ReplyCode::error);
  EXPECT_EQ(r->error, ErrorCode::protocol);
  EXPECT_TRUE(Contains(r->message, "version 99"));
}

TEST(StoreTcpTest, ClientThatLeavesWhileWaitingIsForgotten) {
  TcpHarness h;
  {
    Fd fd = raw_connect(h.port());
    tcp_store::Request get;
    get.command = tcp_store::Command::get;
    get.key = "k";
    get.timeout_ms = 60000;
    ASSERT_TRUE(raw_send(fd, tcp_store::encode_request(get)).ok());
    std::this_thread::sleep_for(milliseconds(50));
  }  // closed while parked
  auto s = h.client();
  ASSERT_TRUE(s->set("k", "v").ok());
  EXPECT_EQ(s->get_string("k", kLong).value(), "v");
}

TEST(StoreTcpTest, StoppingTheServerEndsParkedCallsPromptly) {
  auto h = std::make_unique<TcpHarness>();
  auto s = h->client();
  Status result;
  auto start = Clock::now();
  std::thread waiter([&] { result = s->get("never", kLong).status(); });
  std::this_thread::sleep_for(milliseconds(100));
  h.reset();
  waiter.join();
  EXPECT_EQ(result.code(), ErrorCode::peer_lost) << result.to_string();
  EXPECT_LE(Clock::now() - start, kLong / 2);
}

// ---- Wire protocol: pure encode/decode -----------------------------------------------------

std::vector<tcp_store::Request> sample_requests() {
  using tcp_store::Command;
  std::vector<tcp_store::Request> out(7);
  out[0].command = Command::ping;
  out[1].command = Command::set;
  out[1].key = "key";
  out[1].value = {0, 1, 2};
  out[2].command = Command::get;
  out[2].key = "";
  out[2].timeout_ms = 12345;
  out[3].command = Command::add;
  out[3].key = "n";
  out[3].delta = -42;
  out[4].command = Command::wait;
  out[4].keys = {"a", "", "ccc"};
  out[4].timeout_ms = 7;
  out[5].command = Command::check;
  out[5].keys = {};
  out[6].command = Command::erase;
  out[6].key = std::string(tcp_store::kMaxKeyBytes, 'z');
  out.emplace_back();
  out.back().command = Command::multi_get;
  out.back().keys = {"tcp/addr/0", "", "tcp/addr/2"};
  out.back().timeout_ms = 30000;
  return out;
}

bool same(const tcp_store::Request& a, const tcp_store::Request& b) {
  return a.command == b.command && a.magic == b.magic && a.version == b.version && a.key == b.key &&
         a.value == b.value && a.delta == b.delta && a.keys == b.keys &&
         a.timeout_ms == b.timeout_ms && a.nonce == b.nonce;
}

TEST(StoreProtocolTest, EveryRequestRoundTripsAndEveryPrefixAsksForMore) {
  for (const auto& req : sample_requests()) {
    Bytes frame = tcp_store::encode_request(req);
    size_t consumed = 0;
    auto r = tcp_store::decode_request(frame, &consumed);
    ASSERT_TRUE(r.ok() && r->has_value()) << tcp_store::to_string(req.command);
    EXPECT_TRUE(same(**r, req)) << tcp_store::to_string(req.command);
    EXPECT_EQ(consumed, frame.size());
    for (size_t n = 0; n < frame.size(); ++n) {
      auto part = tcp_store::decode_request(std::span(frame.data(), n), &consumed);
      ASSERT_TRUE(part.ok()) << n << ": " << part.status().to_string();
      EXPECT_FALSE(part->has_value());
    }
  }
}

TEST(StoreProtocolTest, RejectsMalformedFrames) {
  auto rejects = [](Bytes frame, const char* why) {
    size_t consumed = 0;
    auto r = tcp_store::decode_request(frame, &consumed);
    EXPECT_FALSE(r.ok()) << why;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), ErrorCode::protocol) << why;
    }
  };
  auto le32 = [](uint32_t v) {
    return Bytes{uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  };
  auto frame_of = [&](Bytes payload) {
    Bytes f = le32(static_cast<uint32_t>(payload.size()));
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
  };
  auto cat = [](std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  rejects(le32(0), "empty frame");
  rejects(le32(uint32_t(tcp_store::kMaxPayloadBytes + 1)), "oversized frame");
  rejects(frame_of({0}), "command 0");
  rejects(frame_of({8}), "command 8");
  rejects(cat({le32(100), Bytes{200}}), "unknown command seen before the frame is complete");
  rejects(frame_of(cat({Bytes{7}, le32(4097), Bytes(4097, 'k')})), "key too long");
  rejects(
      frame_of(cat({Bytes{2}, le32(1), Bytes{'k'}, le32(uint32_t(tcp_store::kMaxValueBytes + 1))})),
      "value too long");
  rejects(frame_of(cat({Bytes{6}, le32(uint32_t(tcp_store::kMaxKeysPerRequest + 1))})),
          "too many keys");
  rejects(frame_of(cat({Bytes{6}, le32(1000)})), "key count beyond the frame");
  rejects(frame_of(cat({Bytes{7}, le32(10), Bytes{'a'}})), "key beyond the frame");
  rejects(frame_of(cat({Bytes{7}, le32(1), Bytes{'a', 'b'}})), "trailing byte");
  rejects(frame_of(cat({Bytes{3}, le32(1), Bytes{'a'}, Bytes{1, 2, 3}})), "short timeout");
  rejects(frame_of(cat({Bytes{1}, le32(0x12345678), le32(1)})), "bad magic");
}

TEST(StoreProtocolTest, RandomAndMutatedFramesNeverCrashTheParser) {
  std::mt19937 rng(12345);
  const auto samples = sample_requests();
  size_t parsed = 0, errors = 0, partial = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytes buf;
    switch (iter % 4) {
      case 0:  // pure noise, short
        buf = random_bytes(rng() % 64, rng());
        break;
      case 1:  // noise behind a plausible small length
        buf = random_bytes(4 + rng() % 64, rng());
        buf[1] = buf[2] = buf[3] = 0;
        break;
      default: {  // a valid frame with bytes flipped, cut off or appended
        buf = tcp_store::encode_request(samples[rng() % samples.size()]);
        for (int flips = 1 + rng() % 4; flips > 0; --flips)
          buf[rng() % buf.size()] = uint8_t(rng());
        if (rng() % 3 == 0) buf.resize(rng() % (buf.size() + 1));
        if (rng() % 3 == 0) {
          Bytes extra = random_bytes(rng() % 16, rng());
          buf.insert(buf.end(), extra.begin(), extra.end());
        }
      }
    }
    size_t consumed = 0;
    auto r = tcp_store::decode_request(buf, &consumed);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), ErrorCode::protocol);
      errors++;
    } else if (!r->has_value()) {
      EXPECT_EQ(consumed, 0u);
      partial++;
    } else {
      // Whatever parses re-encodes to exactly the bytes it came from: nothing is misread.
      ASSERT_LE(consumed, buf.size());
      Bytes again = tcp_store::encode_request(**r);
      EXPECT_TRUE(again == Bytes(buf.begin(), buf.begin() + consumed));
      parsed++;
    }
    // The reply parser meets hostile bytes too (on the client side).
    auto cmd = static_cast<tcp_store::Command>(1 + rng() % 8);
    if (buf.size() > 4) (void)tcp_store::decode_reply(cmd, std::span(buf).subspan(4));
  }
  // The mix exercised all three outcomes.
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(errors, 0u);
  EXPECT_GT(partial, 0u);
}

TEST(StoreProtocolTest, RepliesRoundTrip) {
  using tcp_store::Command;
  using tcp_store::Reply;
  Reply get;
  get.value = {1, 2, 3};
  Reply add;
  add.integer = -5;
  Reply check;
  check.flag = true;
  Reply ping;
  ping.integer = tcp_store::kVersion;
  Reply multi;
  multi.values = {{1}, {}, {7, 8, 9}};
  const std::vector<std::pair<Command, Reply>> cases = {
      {Command::get, get},
      {Command::add, add},
      {Command::check, check},
      {Command::ping, ping},
      {Command::set, Reply::ok()},
      {Command::wait, Reply::timed_out()},
      {Command::erase, Reply::failure(ErrorCode::invalid_argument, "nope")},
      {Command::multi_get, multi},
      {Command::multi_get, Reply()},
      {Command::multi_get, Reply::timed_out()}};
  for (const auto& [cmd, reply] : cases) {
    Bytes frame = tcp_store::encode_reply(cmd, reply);
    auto r = tcp_store::decode_reply(cmd, std::span(frame).subspan(4));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->code, reply.code);
    EXPECT_EQ(r->value, reply.value);
    EXPECT_EQ(r->integer, reply.integer);
    EXPECT_EQ(r->flag, reply.flag);
    EXPECT_EQ(r->error, reply.error);
    EXPECT_EQ(r->message, reply.message);
    EXPECT_EQ(r->values, reply.values);
  }
  // A multi_get reply that claims more values than its bytes can hold, or than any request may
  // ask for, is refused before anything is allocated for them.
  const Bytes claims_many = {0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0};
  EXPECT_EQ(tcp_store::decode_reply(Command::multi_get, claims_many).status().code(),
            ErrorCode::protocol);
  const Bytes claims_three = {0, 3, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(tcp_store::decode_reply(Command::multi_get, claims_three).status().code(),
            ErrorCode::protocol);
  Bytes timeout_to_set = tcp_store::encode_reply(Command::set, Reply::timed_out());
  EXPECT_FALSE(tcp_store::decode_reply(Command::set, std::span(timeout_to_set).subspan(4)).ok());
}

// ---- Server table: parking and waking without sockets --------------------------------------

TEST(StoreTableTest, ParkedRequestsWakeOnSetAndExpireAtTheirDeadline) {
  using tcp_store::Command;
  tcp_store::TcpStoreTable table;
  auto now = tcp_store::TcpStoreTable::Clock::now();
  tcp_store::Request get;
  get.command = Command::get;
  get.key = "k";
  get.timeout_ms = 1000;
  tcp_store::Request wait;
  wait.command = Command::wait;
  wait.keys = {"a", "k"};
  wait.timeout_ms = 500;
  EXPECT_FALSE(table.handle(10, get, now).has_value());
  EXPECT_FALSE(table.handle(11, wait, now).has_value());
  EXPECT_EQ(table.parked_count(), 2u);
  EXPECT_EQ(table.next_deadline(), now + milliseconds(500));

  tcp_store::Request set;
  set.command = Command::set;
  set.key = "k";
  set.value = bytes_of("v");
  ASSERT_TRUE(table.handle(12, set, now).has_value());
  auto done = table.take_completions();
  ASSERT_EQ(done.size(), 1u);  // the get; the wait still lacks "a"
  EXPECT_EQ(done[0].conn, 10u);
  EXPECT_EQ(done[0].reply.value, bytes_of("v"));

  table.expire(now + milliseconds(499));
  EXPECT_TRUE(table.take_completions().empty());
  table.expire(now + milliseconds(500));
  done = table.take_completions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].conn, 11u);
  EXPECT_EQ(done[0].reply.code, tcp_store::ReplyCode::timeout);
  EXPECT_EQ(table.parked_count(), 0u);
  EXPECT_FALSE(table.next_deadline().has_value());
}

TEST(StoreTableTest, DroppedConnectionsAreNotAnswered) {
  using tcp_store::Command;
  tcp_store::TcpStoreTable table;
  auto now = tcp_store::TcpStoreTable::Clock::now();
  tcp_store::Request get;
  get.command = Command::get;
  get.key = "k";
  get.timeout_ms = 1000;
  EXPECT_FALSE(table.handle(3, get, now).has_value());
  table.drop(3);
  tcp_store::Request add;
  add.command = Command::add;
  add.key = "k";
  add.delta = 1;
  EXPECT_EQ(table.handle(4, add, now)->integer, 1);
  EXPECT_TRUE(table.take_completions().empty());
  EXPECT_EQ(table.parked_count(), 0u);
}

}  // namespace
}  // namespace weft
