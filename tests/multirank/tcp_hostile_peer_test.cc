// A peer that completes the handshake and then sends hostile frames: the TCP transport must end
// the pending receive with a protocol error naming the peer, never crash or hang.
#include <gtest/gtest.h>

#include <algorithm>

#include <sys/socket.h>

#include <cstring>
#include <sstream>
#include <thread>

#include "base/socket.h"
#include "runtime/buffer_pool.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/tcp_transport.h"
#include "weft/store.h"

namespace weft {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kToken = 0x5eed5eed1234ull;

// Connects to rank 0 as rank 1 and sends a valid HELLO; *out stays invalid on failure.
void handshake_as_rank1(Store& store, Fd* out) {
  // Publish an address record like a real rank 1 (same host as rank 0: one socket per pair).
  ASSERT_TRUE(store.set("tcp/addr/1", std::string_view("test\n127.0.0.1\n1\nmachine")).ok());
  auto record = store.get_string("tcp/addr/0", 10s);
  ASSERT_TRUE(record.ok());
  std::istringstream in(record.value());
  std::string host, ip, port;
  std::getline(in, host);
  std::getline(in, ip);
  std::getline(in, port);
  auto fd = connect_tcp("127.0.0.1", static_cast<uint16_t>(std::stoi(port)), Clock::now() + 10s,
                        OnRefused::retry);
  ASSERT_TRUE(fd.ok()) << fd.status().to_string();
  uint8_t hello[tcp::kHeaderBytes + tcp::kHelloPayload];
  tcp::FrameHeader h;
  h.type = tcp::FrameType::hello;
  h.comm = static_cast<uint32_t>(kToken);
  h.length = tcp::kHelloPayload;
  tcp::encode_header(h, hello);
  tcp::encode_hello({kToken, 1, 2, 0, 1}, hello + tcp::kHeaderBytes);
  ASSERT_TRUE(send_all(fd->get(), hello, sizeof(hello), Clock::now() + 10s).ok());
  *out = std::move(fd.value());
}

// Connects as rank 1, then sends `hostile` bytes; keeps the socket open until `release` is set so
// the failure comes from the bytes, not from a closed connection.
void fake_peer(Store& store, std::vector<uint8_t> hostile, std::atomic<bool>& release) {
  Fd fd;
  handshake_as_rank1(store, &fd);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(send_all(fd.get(), hostile.data(), hostile.size(), Clock::now() + 10s).ok());
  while (!release.load()) std::this_thread::sleep_for(10ms);
}

std::vector<uint8_t> frame(tcp::FrameHeader h, size_t payload_bytes = 0) {
  std::vector<uint8_t> out(tcp::kHeaderBytes + payload_bytes, 0xab);
  h.comm = static_cast<uint32_t>(kToken);
  tcp::encode_header(h, out.data());
  return out;
}

struct Hostile {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* expect;
};

std::vector<Hostile> hostile_inputs() {
  std::vector<Hostile> v;
  v.push_back({"garbage", std::vector<uint8_t>(tcp::kHeaderBytes, 0x41), "magic"});
  tcp::FrameHeader big;
  big.type = tcp::FrameType::eager;
  big.tag = p2p_tag(1);
  big.length = 1ull << 40;
  v.push_back({"huge eager", frame(big), "exceeds the limit"});
  tcp::FrameHeader data;
  data.type = tcp::FrameType::data;
  data.msg_id = 77;
  data.length = 8;
  v.push_back({"data for unknown message", frame(data, 8), "unknown message"});
  tcp::FrameHeader cts;
  cts.type = tcp::FrameType::cts;
  cts.msg_id = 5;
  v.push_back({"cts for unknown message", frame(cts), "unknown"});
  tcp::FrameHeader other = big;
  other.length = 4;
  auto wrong_comm = frame(other, 4);
  wrong_comm[12] ^= 0xff;
  v.push_back({"other communicator", wrong_comm, "another communicator"});
  tcp::FrameHeader hello;
  hello.type = tcp::FrameType::hello;
  hello.length = tcp::kHelloPayload;
  v.push_back({"second hello", frame(hello, tcp::kHelloPayload), "HELLO"});
  // Eager messages nobody receives, 64 KiB each (the default eager threshold), beyond the 4 MiB
  // credit an honest sender would have waited on: the receiver must not keep parking them.
  tcp::FrameHeader eager;
  eager.type = tcp::FrameType::eager;
  eager.tag = p2p_tag(1);
  eager.length = 64 << 10;
  const std::vector<uint8_t> one = frame(eager, eager.length);
  std::vector<uint8_t> flood;
  for (int i = 0; i < 65; ++i) flood.insert(flood.end(), one.begin(), one.end());
  v.push_back({"eager beyond the credit", flood, "beyond its 4194304-byte credit"});
  // An error report carrying terminal escape sequences and a newline: shown escaped, on one line.
  const std::string text = "\x1b[2Jcleared\nsecond line\x7f";
  tcp::FrameHeader error;
  error.type = tcp::FrameType::error;
  error.offset = static_cast<uint64_t>(ErrorCode::protocol);
  error.length = text.size();
  std::vector<uint8_t> report = frame(error, text.size());
  std::copy(text.begin(), text.end(), report.begin() + tcp::kHeaderBytes);
  v.push_back({"error text with escape sequences", report,
               "rank 1 reports: \\x1b[2Jcleared\\x0asecond line\\x7f"});
  return v;
}

TEST(TcpHostilePeer, BadFramesEndPendingReceiveWithProtocolError) {
  for (const Hostile& input : hostile_inputs()) {
    SCOPED_TRACE(input.name);
    auto store = make_memory_store();
    BufferPool pool;
    std::atomic<bool> release{false};
    std::thread peer(fake_peer, std::ref(*store), input.bytes, std::ref(release));
    TcpTransportConfig cfg;
    cfg.rank = 0;
    cfg.size = 2;
    cfg.token = kToken;
    cfg.host_id = "test";
    cfg.options.sockets_per_peer = 1;
    cfg.options.connect_timeout = 10s;
    auto t = make_tcp_transport(cfg, *store, pool);
    ASSERT_TRUE(t.ok()) << t.status().to_string();

    Completion done;
    Request r;
    r.kind = Request::Kind::recv;
    r.peer = 1;
    r.tag = p2p_tag(99);
    uint32_t sink = 0;
    r.buf = &sink;
    r.bytes = sizeof(sink);
    r.fp.kind = OpKind::recv;
    r.fp.count = sizeof(sink);
    r.completion = &done;
    t.value()->post_recv(&r);
    auto deadline = Completion::Clock::now() + 10s;
    while (!r.done() && Completion::Clock::now() < deadline) {
      uint32_t gen = done.generation();
      if (r.done()) break;
      done.wait_for_change(gen, deadline);
    }
    ASSERT_TRUE(r.done());
    EXPECT_EQ(r.status.code(), ErrorCode::protocol) << r.status.to_string();
    EXPECT_NE(r.status.message().find("rank 1"), std::string::npos) << r.status.message();
    EXPECT_NE(r.status.message().find(input.expect), std::string::npos) << r.status.message();
    EXPECT_EQ(t.value()->error().code(), ErrorCode::protocol);
    release = true;
    peer.join();
  }
}

// A peer that completes the handshake and then stays connected: silent, or sending a heartbeat
// every 50 ms. Counts the heartbeat frames rank 0 sends it.
void quiet_peer(Store& store, bool beat, std::atomic<bool>& release, std::atomic<int>& beats_in) {
  Fd fd;
  handshake_as_rank1(store, &fd);
  ASSERT_TRUE(fd.valid());
  tcp::FrameHeader hb;
  hb.type = tcp::FrameType::heartbeat;
  const std::vector<uint8_t> beat_frame = frame(hb);
  std::vector<uint8_t> got;
  while (!release.load()) {
    if (beat) {
      ASSERT_TRUE(send_all(fd.get(), beat_frame.data(), beat_frame.size(), Clock::now() + 10s).ok());
    }
    uint8_t buf[4096];
    ssize_t n;
    while ((n = ::recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT)) > 0) got.insert(got.end(), buf, buf + n);
    for (; got.size() >= tcp::kHeaderBytes; got.erase(got.begin(), got.begin() + tcp::kHeaderBytes)) {
      auto d = tcp::decode_header(got.data(), tcp::FrameLimits{1024, 1 << 20});
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      ASSERT_EQ(d->length, 0u);
      if (d->type == tcp::FrameType::heartbeat) ++beats_in;
    }
    std::this_thread::sleep_for(50ms);
  }
}

// Calls heartbeat() every 50 ms for `total`, the way the communicator's watchdog does; returns
// the first failure and when it came.
std::pair<Status, std::chrono::steady_clock::duration> tick(Transport& t, std::chrono::milliseconds total,
                                                            std::chrono::milliseconds peer_timeout) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < total) {
    Status st = t.heartbeat(std::chrono::steady_clock::now(), peer_timeout);
    if (!st.ok()) return {st, std::chrono::steady_clock::now() - start};
    std::this_thread::sleep_for(50ms);
  }
  return {Status(), total};
}

TEST(TcpHeartbeat, SilentPeerIsDeclaredLostAfterPeerTimeout) {
  for (bool beat : {false, true}) {
    SCOPED_TRACE(beat ? "peer sends heartbeats" : "silent peer");
    auto store = make_memory_store();
    BufferPool pool;
    std::atomic<bool> release{false};
    std::atomic<int> beats_in{0};
    std::thread peer(quiet_peer, std::ref(*store), beat, std::ref(release), std::ref(beats_in));
    TcpTransportConfig cfg;
    cfg.rank = 0;
    cfg.size = 2;
    cfg.token = kToken;
    cfg.host_id = "test";
    cfg.options.sockets_per_peer = 1;
    cfg.options.connect_timeout = 10s;
    auto t = make_tcp_transport(cfg, *store, pool);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    auto [st, after] = tick(*t.value(), 1500ms, 400ms);
    if (beat) {
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_TRUE(t.value()->lost_peers().empty());
    } else {
      EXPECT_EQ(st.code(), ErrorCode::peer_lost) << st.to_string();
      EXPECT_NE(st.message().find("rank 1 is not responding"), std::string::npos) << st.message();
      EXPECT_GE(after, 400ms);
      EXPECT_EQ(t.value()->lost_peers(), std::vector<int>{1});
    }
    release = true;
    peer.join();
    // Idle links carry heartbeats from this side too.
    EXPECT_GE(beats_in.load(), 1);
  }
}

}  // namespace
}  // namespace weft
