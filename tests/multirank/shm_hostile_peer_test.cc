// A peer that maps the segments correctly and then writes hostile records into its ring: the
// shared-memory transport must end the pending receive with a protocol error naming the peer,
// never crash, hang or write outside the posted buffer. A randomised sweep does the same with
// random record headers (the g++ stand-in for a fuzzer, like frame_test for TCP frames).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "runtime/buffer_pool.h"
#include "transport/shm/segment.h"
#include "transport/shm/shm_transport.h"
#include "weft/store.h"

namespace weft {
namespace {

using namespace std::chrono_literals;
constexpr size_t kRing = 64 * 1024;

// Rank 0 played by the test: creates its segment, maps rank 1's, then writes `records` (raw
// bytes, 64-byte multiples) into its ring to rank 1 and rings rank 1's doorbell.
class FakeRank0 {
 public:
  FakeRank0(Store& store, uint64_t token) {
    const std::string name = "/weft-" + std::to_string(token) + "-hostile-" + std::to_string(::getpid());
    auto own = shm::Segment::create(name, 0, 2, token, kRing);
    EXPECT_TRUE(own.ok()) << own.status().to_string();
    own_ = std::move(own.value());
    EXPECT_TRUE(store.set("shm/seg/0", name).ok());
    auto peer_name = store.get_string("shm/seg/1", 10s);
    EXPECT_TRUE(peer_name.ok());
    auto peer = shm::Segment::open(peer_name.value(), 1, 2, token, kRing);
    EXPECT_TRUE(peer.ok()) << peer.status().to_string();
    peer_ = std::move(peer.value());
    EXPECT_TRUE(store.set("shm/ready/0", "1").ok());
  }

  void write(const std::vector<uint8_t>& bytes, uint64_t tail_override = 0) {
    shm::RingCtl& ctl = peer_->ctl(0);
    std::memcpy(peer_->ring(0), bytes.data(), std::min(bytes.size(), kRing));
    ctl.tail.store(tail_override != 0 ? tail_override : bytes.size(), std::memory_order_release);
    shm::ring(peer_->header());
  }

 private:
  std::unique_ptr<shm::Segment> own_;
  std::unique_ptr<shm::Segment> peer_;
};

std::vector<uint8_t> record(shm::Record r, size_t payload_bytes = 0) {
  std::vector<uint8_t> out(shm::record_size(payload_bytes), 0xab);
  std::memcpy(out.data(), &r, sizeof(r));
  return out;
}

shm::Record eager(uint32_t len) {
  shm::Record r;
  r.type = static_cast<uint32_t>(shm::RecordType::eager);
  r.len = len;
  r.bytes = len;
  r.tag = p2p_tag(7);
  r.kind = static_cast<uint8_t>(OpKind::send);
  r.count = len;
  return r;
}

// Runs rank 1 (a real transport) against the fake rank 0; returns the receive's status.
// `patience`: how long the receive may take; with must_finish false a receive still pending then
// reads as ErrorCode::timeout (a harmless random record).
Status receive_against(const std::function<void(FakeRank0&)>& hostile,
                       std::chrono::milliseconds patience = 10s, bool must_finish = true) {
  constexpr size_t recv_bytes = 16;
  static std::atomic<uint64_t> next{1};
  const uint64_t token = 0x4057000000ull + next.fetch_add(1) + (static_cast<uint64_t>(::getpid()) << 40);
  auto store = make_memory_store();
  BufferPool pool;
  std::unique_ptr<FakeRank0> fake;
  std::thread t([&] { fake = std::make_unique<FakeRank0>(*store, token); });
  ShmTransportConfig cfg;
  cfg.rank = 1;
  cfg.size = 2;
  cfg.token = token;
  cfg.options.shm_ring_bytes = kRing;
  cfg.options.connect_timeout = 10s;
  auto tr = make_shm_transport(cfg, *store, pool);
  t.join();
  if (!tr.ok()) return tr.status();
  std::vector<uint8_t> buf(recv_bytes + 64, 0x11);
  Completion c;
  Request r;
  r.kind = Request::Kind::recv;
  r.peer = 0;
  r.tag = p2p_tag(7);
  r.buf = buf.data();
  r.bytes = recv_bytes;
  r.fp.kind = OpKind::recv;
  r.fp.count = recv_bytes;
  r.completion = &c;
  const uint32_t seen = c.generation();
  (*tr)->post_recv(&r);
  hostile(*fake);
  const auto deadline = Completion::Clock::now() + patience;
  uint32_t gen = seen;
  while (!r.done() && (*tr)->wait(c, gen, &r, deadline)) gen = c.generation();
  if (must_finish) EXPECT_TRUE(r.done()) << "the receive hung";
  // Nothing past the posted buffer was written.
  for (size_t i = recv_bytes; i < buf.size(); ++i) EXPECT_EQ(buf[i], 0x11) << i;
  Status st = r.done() ? r.status : Status(ErrorCode::timeout, "hung");
  tr->reset();
  fake.reset();
  return st;
}

TEST(ShmHostilePeerTest, ValidEagerMessageIsDelivered) {
  Status st = receive_against([](FakeRank0& f) { f.write(record(eager(16), 16)); });
  EXPECT_TRUE(st.ok()) << st.to_string();
}

struct Case {
  const char* name;
  std::function<void(FakeRank0&)> write;
  const char* expect;
};

TEST(ShmHostilePeerTest, HostileRecordsFailTheReceiveWithAProtocolError) {
  const std::vector<Case> cases = {
      {"unknown type", [](FakeRank0& f) { auto r = eager(16); r.type = 99; f.write(record(r, 16)); },
       "record type 99"},
      {"zero type", [](FakeRank0& f) { auto r = eager(16); r.type = 0; f.write(record(r, 16)); },
       "record type 0"},
      {"length past the producer position",
       [](FakeRank0& f) { auto r = eager(16); r.len = 4096; r.bytes = 4096; f.write(record(r, 16)); },
       "readable"},
      {"length beyond the ring",
       [](FakeRank0& f) { auto r = eager(16); r.len = 0xffffffffu; f.write(record(r, 16)); },
       "record of"},
      {"producer position beyond the ring",
       [](FakeRank0& f) { f.write(record(eager(16), 16), kRing * 4); }, "producer position"},
      {"unaligned producer position", [](FakeRank0& f) { f.write(record(eager(16), 16), 100); },
       "producer position"},
      {"eager length disagrees with message size",
       [](FakeRank0& f) { auto r = eager(16); r.bytes = 1 << 20; f.write(record(r, 16)); },
       "eager length"},
      {"unknown dtype", [](FakeRank0& f) { auto r = eager(16); r.dtype = 200; f.write(record(r, 16)); },
       "unknown operation"},
      {"cts for an unknown message",
       [](FakeRank0& f) { shm::Record r; r.type = 4; r.msg_id = 77; f.write(record(r)); },
       "CTS for unknown message 77"},
      {"data for an unknown message",
       [](FakeRank0& f) { shm::Record r; r.type = 5; r.msg_id = 5; r.len = 8; f.write(record(r, 8)); },
       "data for unknown message 5"},
      {"data past the end of the receive",
       [](FakeRank0& f) {
         shm::Record rts = eager(0);
         rts.type = 3;
         rts.bytes = 16;
         rts.msg_id = 9;
         rts.count = 16;
         shm::Record d;
         d.type = 5;
         d.msg_id = 9;
         d.offset = 8;
         d.len = 64;
         auto bytes = record(rts);
         auto more = record(d, 64);
         bytes.insert(bytes.end(), more.begin(), more.end());
         f.write(bytes);
       },
       "data at offset 8"},
      {"credit overflow",
       [](FakeRank0& f) { shm::Record r; r.type = 6; r.bytes = uint64_t{1} << 60; f.write(record(r)); },
       "credit overflow"},
  };
  for (const Case& c : cases) {
    Status st = receive_against(c.write);
    EXPECT_EQ(st.code(), ErrorCode::protocol) << c.name << ": " << st.to_string();
    EXPECT_NE(st.message().find("rank 0"), std::string::npos) << c.name << ": " << st.message();
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.name << ": " << st.message();
  }
}

TEST(ShmHostilePeerTest, RandomRecordHeadersNeverCrashOrHang) {
  std::mt19937_64 rng(20261202);
  for (int i = 0; i < 60; ++i) {
    std::vector<uint8_t> bytes(64 * (1 + rng() % 8));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // Mostly plausible types and lengths, so the checks behind the first ones are reached too.
    shm::Record r;
    std::memcpy(&r, bytes.data(), sizeof(r));
    r.type = 1 + static_cast<uint32_t>(rng() % 7);
    r.len = static_cast<uint32_t>(rng() % 3 == 0 ? rng() : rng() % 256);
    std::memcpy(bytes.data(), &r, sizeof(r));
    Status st = receive_against([&](FakeRank0& f) { f.write(bytes); }, 300ms, false);
    // A random record may by chance be harmless (a pad, a credit): then the receive is still
    // pending and the wait ends at its deadline; otherwise it must be a clean error.
    EXPECT_TRUE(st.ok() || st.code() == ErrorCode::protocol || st.code() == ErrorCode::timeout ||
                st.code() == ErrorCode::mismatch)
        << st.to_string();
  }
}

}  // namespace
}  // namespace weft
