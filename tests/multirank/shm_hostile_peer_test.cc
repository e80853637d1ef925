// A peer that maps the segments correctly and then writes hostile records into its ring: the
// shared-memory transport must end the pending receive with a protocol error naming the peer,
// never crash, hang or write outside the posted buffer. A randomised sweep does the same with
// random record headers (the g++ stand-in for a fuzzer, like frame_test for TCP frames).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "multirank/harness.h"
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
    const std::string name =
        "/weft-" + std::to_string(token) + "-hostile-" + std::to_string(::getpid());
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

  // Fills SharedSlot `parity` of its own segment (fields, then `call` last) and rings rank 1.
  void write_slot(int parity, const std::function<void(shm::SharedSlot&, uint8_t*)>& fill) {
    fill(own_->shared_slot(parity), shm::shared_data(own_->shared_slot(parity)));
    shm::ring(peer_->header());
  }

  // The first record rank 1 wrote to this rank (type 0 while there is none).
  shm::Record first_from_rank1() {
    shm::Record r;
    r.type = 0;
    if (own_->ctl(1).tail.load(std::memory_order_acquire) >= shm::kRecordBytes) {
      std::memcpy(&r, own_->ring(1), sizeof(r));
    }
    return r;
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

// Rank 1 (a real transport) connected to the fake rank 0 through a fresh store; the transport
// goes before the fake and the pool.
struct AgainstFake {
  std::shared_ptr<Store> store = make_memory_store();
  BufferPool pool;
  std::unique_ptr<FakeRank0> fake;
  std::unique_ptr<Transport> transport;
  size_t cma_threshold = 0;  // rank 1's Options::shm_cma_threshold

  Status start() {
    static std::atomic<uint64_t> next{1};
    const uint64_t token =
        0x4057000000ull + next.fetch_add(1) + (static_cast<uint64_t>(::getpid()) << 40);
    std::thread t([&] { fake = std::make_unique<FakeRank0>(*store, token); });
    ShmTransportConfig cfg;
    cfg.rank = 1;
    cfg.size = 2;
    cfg.token = token;
    cfg.options.shm_ring_bytes = kRing;
    cfg.options.shm_cma_threshold = cma_threshold;
    cfg.options.connect_timeout = 10s;
    auto tr = make_shm_transport(cfg, *store, pool);
    t.join();
    if (!tr.ok()) return tr.status();
    transport = std::move(tr.value());
    return Status();
  }
  ~AgainstFake() {
    transport.reset();
    fake.reset();
  }
};

// Runs rank 1 (a real transport) against the fake rank 0; returns the receive's status.
// `patience`: how long the receive may take; with must_finish false a receive still pending then
// reads as ErrorCode::timeout (a harmless random record).
// `after(fake, received)` runs once the receive has ended. `cma_threshold`: rank 1's
// shm_cma_threshold (single-copy reads allowed when not 0).
Status receive_against(const std::function<void(FakeRank0&)>& hostile,
                       std::chrono::milliseconds patience = 10s, bool must_finish = true,
                       size_t cma_threshold = 0,
                       const std::function<void(FakeRank0&, const uint8_t*)>& after = {}) {
  constexpr size_t recv_bytes = 16;
  AgainstFake a;
  a.cma_threshold = cma_threshold;
  WEFT_RETURN_IF_ERROR(a.start());
  Transport* tr = a.transport.get();
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
  tr->post_recv(&r);
  hostile(*a.fake);
  const auto deadline = Completion::Clock::now() + patience;
  uint32_t gen = seen;
  while (!r.done() && tr->wait(c, gen, &r, deadline)) gen = c.generation();
  if (must_finish) EXPECT_TRUE(r.done()) << "the receive hung";
  // Nothing past the posted buffer was written.
  for (size_t i = recv_bytes; i < buf.size(); ++i) EXPECT_EQ(buf[i], 0x11) << i;
  Status st = r.done() ? r.status : Status(ErrorCode::timeout, "hung");
  if (after) {
    // What rank 1 answers goes out on its next pass (a wait that moves nothing flushes it).
    Completion idle;
    tr->wait(idle, idle.generation(), nullptr, Completion::Clock::now() + 50ms);
    after(*a.fake, buf.data());
  }
  // The transport may still hold the receive (a harmless record): it goes before `r` and `buf`.
  a.transport.reset();
  return st;
}

TEST(ShmHostilePeerTest, ValidEagerMessageIsDelivered) {
  Status st = receive_against([](FakeRank0& f) { f.write(record(eager(16), 16)); });
  EXPECT_TRUE(st.ok()) << st.to_string();
}

// A request-to-send for the 16-byte receive, offering to be read at `address`.
shm::Record offer(uint64_t address) {
  shm::Record rts = eager(0);
  rts.type = static_cast<uint32_t>(shm::RecordType::rts);
  rts.bytes = 16;
  rts.count = 16;
  rts.msg_id = 9;
  rts.offset = address;
  return rts;
}

// A valid offer: rank 1 reads the message from "rank 0's" memory (this process) and acknowledges
// it with a `read` record; with single copy off it asks for the data (CTS) instead.
TEST(ShmHostilePeerTest, OfferedMessageIsReadInPlaceAndAcknowledged) {
  if (!harness::cma_allowed()) GTEST_SKIP() << "process_vm_readv is refused here";
  static const std::vector<uint8_t> message(16, 0x5a);
  const auto address = reinterpret_cast<uintptr_t>(message.data());
  Status st = receive_against([&](FakeRank0& f) { f.write(record(offer(address))); }, 10s, true,
                              16, [](FakeRank0& f, const uint8_t* got) {
                                for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], 0x5a) << i;
                                const shm::Record ack = f.first_from_rank1();
                                EXPECT_EQ(ack.type, static_cast<uint32_t>(shm::RecordType::read));
                                EXPECT_EQ(ack.msg_id, 9u);
                              });
  EXPECT_TRUE(st.ok()) << st.to_string();
  st = receive_against([&](FakeRank0& f) { f.write(record(offer(address))); }, 300ms, false, 0,
                       [](FakeRank0& f, const uint8_t*) {
                         const shm::Record cts = f.first_from_rank1();
                         EXPECT_EQ(cts.type, static_cast<uint32_t>(shm::RecordType::cts));
                         EXPECT_EQ(cts.msg_id, 9u);
                       });
  EXPECT_EQ(st.code(), ErrorCode::timeout) << st.to_string();  // the data never comes
}

// Offers that cannot be honoured fail the transport with a protocol error naming rank 0; the
// receiving rank does not crash and writes nothing outside the posted buffer.
TEST(ShmHostilePeerTest, HostileOffersFailWithAProtocolError) {
  const std::vector<std::pair<uint64_t, const char*>> cases = {
      {0x1000, "cannot be read"},                     // never mapped
      {~uint64_t{0} - 4, "offered at address"},       // wraps around
      {uint64_t{1} << 62, "cannot be read"},          // beyond the address space
  };
  for (const auto& [address, expect] : cases) {
    Status st = receive_against([&](FakeRank0& f) { f.write(record(offer(address))); }, 10s, true, 16);
    EXPECT_EQ(st.code(), ErrorCode::protocol) << address << ": " << st.to_string();
    EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(expect), std::string::npos) << st.message();
  }
  shm::Record ack;
  ack.type = static_cast<uint32_t>(shm::RecordType::read);
  ack.msg_id = 4;
  Status st = receive_against([&](FakeRank0& f) { f.write(record(ack)); });
  EXPECT_EQ(st.code(), ErrorCode::protocol) << st.to_string();
  EXPECT_NE(st.message().find("read acknowledged for message 4, which was not offered"),
            std::string::npos)
      << st.message();
}

struct Case {
  const char* name;
  std::function<void(FakeRank0&)> write;
  const char* expect;
};

TEST(ShmHostilePeerTest, HostileRecordsFailTheReceiveWithAProtocolError) {
  const std::vector<Case> cases = {
      {"unknown type",
       [](FakeRank0& f) {
         auto r = eager(16);
         r.type = 99;
         f.write(record(r, 16));
       },
       "record type 99"},
      {"zero type",
       [](FakeRank0& f) {
         auto r = eager(16);
         r.type = 0;
         f.write(record(r, 16));
       },
       "record type 0"},
      {"length past the producer position",
       [](FakeRank0& f) {
         auto r = eager(16);
         r.len = 4096;
         r.bytes = 4096;
         f.write(record(r, 16));
       },
       "readable"},
      {"length beyond the ring",
       [](FakeRank0& f) {
         auto r = eager(16);
         r.len = 0xffffffffu;
         f.write(record(r, 16));
       },
       "record of"},
      {"producer position beyond the ring",
       [](FakeRank0& f) { f.write(record(eager(16), 16), kRing * 4); }, "producer position"},
      {"unaligned producer position", [](FakeRank0& f) { f.write(record(eager(16), 16), 100); },
       "producer position"},
      {"eager length disagrees with message size",
       [](FakeRank0& f) {
         auto r = eager(16);
         r.bytes = 1 << 20;
         f.write(record(r, 16));
       },
       "eager length"},
      {"unknown dtype",
       [](FakeRank0& f) {
         auto r = eager(16);
         r.dtype = 200;
         f.write(record(r, 16));
       },
       "unknown operation"},
      {"cts for an unknown message",
       [](FakeRank0& f) {
         shm::Record r;
         r.type = 4;
         r.msg_id = 77;
         f.write(record(r));
       },
       "CTS for unknown message 77"},
      {"data for an unknown message",
       [](FakeRank0& f) {
         shm::Record r;
         r.type = 5;
         r.msg_id = 5;
         r.len = 8;
         f.write(record(r, 8));
       },
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
       [](FakeRank0& f) {
         shm::Record r;
         r.type = 6;
         r.bytes = uint64_t{1} << 60;
         f.write(record(r));
       },
       "credit overflow"},
  };
  for (const Case& c : cases) {
    Status st = receive_against(c.write);
    EXPECT_EQ(st.code(), ErrorCode::protocol) << c.name << ": " << st.to_string();
    EXPECT_NE(st.message().find("rank 0"), std::string::npos) << c.name << ": " << st.message();
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.name << ": " << st.message();
  }
}

// Rank 1 runs a shared-buffer collective (call 1: an allreduce of 2 floats, sequence 1) against
// the fake rank 0's SharedSlot; returns what reading rank 0's contribution gave.
Status shared_read_against(const std::function<void(shm::SharedSlot&, uint8_t*)>& fill,
                           std::chrono::milliseconds patience = 10s) {
  AgainstFake a;
  WEFT_RETURN_IF_ERROR(a.start());
  Transport* tr = a.transport.get();
  Fingerprint fp;
  fp.kind = OpKind::allreduce;
  fp.dtype = DataType::fp32;
  fp.count = 2;
  fp.seq = 1;
  tr->begin_operation(fp);
  const auto deadline = Completion::Clock::now() + patience;
  auto buf = tr->shared_begin(fp, deadline);
  EXPECT_TRUE(buf.ok()) << buf.status().to_string();
  if (!buf.ok()) return buf.status();
  std::memset(buf.value(), 0x22, 8);
  tr->shared_publish(8);
  a.fake->write_slot(1, fill);
  auto data = tr->shared_read(0, deadline);
  tr->end_operation();
  Status st = data.ok() ? Status() : data.status();
  if (data.ok()) {
    EXPECT_LE(data->size(), tr->shared_capacity());
    for (uint8_t b : *data) EXPECT_EQ(b, 0x33);  // what the valid case wrote
  }
  return st;
}

// A well-formed slot for call 1 of the fingerprint above.
void valid_slot(shm::SharedSlot& s, uint8_t* data) {
  std::memset(data, 0x33, 8);
  s.seq = 1;
  s.count = 2;
  s.kind = static_cast<uint8_t>(OpKind::allreduce);
  s.dtype = static_cast<uint8_t>(DataType::fp32);
  s.op = static_cast<uint8_t>(ReduceOp::sum);
  s.root = -1;
  s.bytes = 8;
  s.call.store(1, std::memory_order_release);
}

TEST(ShmHostilePeerTest, HostileSharedBuffersFailTheCollectiveCleanly) {
  EXPECT_TRUE(shared_read_against(valid_slot).ok());
  struct SlotCase {
    const char* name;
    std::function<void(shm::SharedSlot&)> spoil;
    ErrorCode code;
    const char* expect;
  };
  const std::vector<SlotCase> cases = {
      {"bytes past the buffer", [](shm::SharedSlot& s) { s.bytes = uint64_t{1} << 40; },
       ErrorCode::protocol, "rank 0 wrote a malformed shared-memory slot: 1099511627776 bytes"},
      {"a later call", [](shm::SharedSlot& s) { s.call = 7; }, ErrorCode::protocol,
       "operation 7 where 1 was expected"},
      {"unknown kind", [](shm::SharedSlot& s) { s.kind = 250; }, ErrorCode::mismatch,
       "rank 0 called"},
      {"unknown dtype", [](shm::SharedSlot& s) { s.dtype = 99; }, ErrorCode::mismatch,
       "rank 0 called"},
      {"other count", [](shm::SharedSlot& s) { s.count = 3; }, ErrorCode::mismatch,
       "rank 1 called allreduce #1 (f32 x 2, sum) but rank 0 called allreduce #1 (f32 x 3, sum)"},
      {"earlier sequence", [](shm::SharedSlot& s) { s.seq = 0; }, ErrorCode::mismatch, "rank 0"},
  };
  for (const SlotCase& c : cases) {
    SCOPED_TRACE(c.name);
    Status st = shared_read_against([&](shm::SharedSlot& s, uint8_t* data) {
      valid_slot(s, data);
      c.spoil(s);
    });
    EXPECT_EQ(st.code(), c.code) << st.to_string();
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.to_string();
  }
  // Random headers: a clean error (or, for a harmless one, success or a timeout), never a crash.
  std::mt19937_64 rng(20261203);
  for (int i = 0; i < 40; ++i) {
    std::array<uint64_t, 6> words;
    for (auto& w : words) w = rng() % 4 == 0 ? rng() : rng() % 8;
    Status st = shared_read_against(
        [&](shm::SharedSlot& s, uint8_t* data) {
          valid_slot(s, data);
          s.seq = words[0];
          s.count = words[1];
          s.kind = static_cast<uint8_t>(words[2]);
          s.bytes = words[3];
          s.root = static_cast<int32_t>(words[4]);
          s.call = words[5] % 3 == 0 ? words[5] : 1;
        },
        300ms);
    EXPECT_TRUE(st.ok() || st.code() == ErrorCode::protocol || st.code() == ErrorCode::mismatch ||
                st.code() == ErrorCode::timeout)
        << st.to_string();
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
    r.type = 1 + static_cast<uint32_t>(rng() % shm::kMaxRecordType);
    r.len = static_cast<uint32_t>(rng() % 3 == 0 ? rng() : rng() % 256);
    std::memcpy(bytes.data(), &r, sizeof(r));
    // Every other run with single-copy reads allowed (random offers are then read, or refused
    // as unreadable, from this process's memory: only into the 16-byte receive).
    Status st = receive_against([&](FakeRank0& f) { f.write(bytes); }, 300ms, false,
                                i % 2 == 0 ? 0 : 16);
    // A random record may by chance be harmless (a pad, a credit): then the receive is still
    // pending and the wait ends at its deadline; otherwise it must be a clean error.
    EXPECT_TRUE(st.ok() || st.code() == ErrorCode::protocol || st.code() == ErrorCode::timeout ||
                st.code() == ErrorCode::mismatch)
        << st.to_string();
  }
}

}  // namespace
}  // namespace weft
