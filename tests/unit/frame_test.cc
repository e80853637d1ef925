// The TCP frame decoder must accept every valid header and reject anything else with a protocol
// error, never crash: exhaustive field checks plus a randomised sweep of hostile headers.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "transport/tcp/frame.h"

namespace weft::tcp {
namespace {

FrameLimits limits() {
  FrameLimits l;
  l.max_eager = 64 * 1024;
  return l;
}

FrameHeader sample() {
  FrameHeader h;
  h.type = FrameType::eager;
  h.comm = 0xdeadbeef;
  h.tag = collective_tag(17, 3);
  h.length = 4096;
  h.fp.kind = OpKind::allreduce;
  h.fp.dtype = DataType::bf16;
  h.fp.op = ReduceOp::max;
  h.fp.root = -1;
  h.fp.count = 2048;
  h.fp.seq = 17;
  return h;
}

TEST(Frame, RoundTripsEveryField) {
  uint8_t buf[kHeaderBytes];
  FrameHeader h = sample();
  h.msg_id = 99;
  h.offset = 12345;
  encode_header(h, buf);
  auto d = decode_header(buf, limits());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->type, h.type);
  EXPECT_EQ(d->comm, h.comm);
  EXPECT_EQ(d->tag, h.tag);
  EXPECT_EQ(d->length, h.length);
  EXPECT_EQ(d->msg_id, h.msg_id);
  EXPECT_EQ(d->offset, h.offset);
  EXPECT_EQ(d->fp, h.fp);
}

TEST(Frame, IsLittleEndianWithMagicFirst) {
  uint8_t buf[kHeaderBytes];
  encode_header(sample(), buf);
  EXPECT_EQ(std::memcmp(buf, "WEFT", 4), 0);
  EXPECT_EQ(buf[4], kWireVersion);
  EXPECT_EQ(buf[5], static_cast<uint8_t>(FrameType::eager));
}

TEST(Frame, RejectsBadMagicVersionTypeAndEnums) {
  struct Case {
    size_t offset;
    uint8_t value;
    const char* expect;
  };
  const Case cases[] = {{0, 'X', "magic"},      {4, kWireVersion + 1, "version"}, {5, 0, "frame type"},
                        {5, 10, "frame type"},  {6, kOpKindCount, "kind"}, {7, 8, "dtype"},
                        {8, 8, "reduce op"},    {9, 1, "reserved"}, {52, 1, "reserved"}};
  for (const Case& c : cases) {
    uint8_t buf[kHeaderBytes];
    encode_header(sample(), buf);
    buf[c.offset] = c.value;
    auto d = decode_header(buf, limits());
    ASSERT_FALSE(d.ok()) << "byte " << c.offset;
    EXPECT_EQ(d.status().code(), ErrorCode::protocol);
    EXPECT_NE(d.status().message().find(c.expect), std::string::npos) << d.status().message();
  }
}

TEST(Frame, BoundsLengths) {
  uint8_t buf[kHeaderBytes];
  FrameHeader h = sample();
  h.length = 64 * 1024 + 1;  // eager above the limit
  encode_header(h, buf);
  EXPECT_FALSE(decode_header(buf, limits()).ok());

  h = sample();
  h.type = FrameType::data;
  h.offset = ~uint64_t{0} - 10;  // offset + length overflows
  h.length = 100;
  encode_header(h, buf);
  EXPECT_FALSE(decode_header(buf, limits()).ok());

  h = sample();
  h.type = FrameType::cts;  // control frames carry no payload
  h.length = 1;
  encode_header(h, buf);
  EXPECT_FALSE(decode_header(buf, limits()).ok());

  h = sample();
  h.type = FrameType::heartbeat;  // nor do heartbeats
  h.length = 0;
  encode_header(h, buf);
  EXPECT_TRUE(decode_header(buf, limits()).ok());
  h.length = 8;
  encode_header(h, buf);
  EXPECT_FALSE(decode_header(buf, limits()).ok());

  h = sample();
  h.type = FrameType::error;
  h.length = kMaxErrorText + 1;
  encode_header(h, buf);
  EXPECT_FALSE(decode_header(buf, limits()).ok());

  h = sample();
  h.type = FrameType::hello;
  h.length = kHelloPayload;
  encode_header(h, buf);
  EXPECT_TRUE(decode_header(buf, limits()).ok());
}

TEST(Frame, RandomBytesNeverCrashAndValidOnesAreInRange) {
  std::mt19937_64 rng(42);
  size_t accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    uint8_t buf[kHeaderBytes];
    encode_header(sample(), buf);
    // Mutate 1..8 random bytes (mostly-valid headers reach the deep checks), or all of them.
    int flips = i % 10 == 0 ? static_cast<int>(kHeaderBytes) : 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) buf[rng() % kHeaderBytes] = static_cast<uint8_t>(rng());
    auto d = decode_header(buf, limits());
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), ErrorCode::protocol);
      continue;
    }
    ++accepted;
    EXPECT_LT(static_cast<int>(d->fp.kind), kOpKindCount);
    EXPECT_LT(static_cast<int>(d->fp.dtype), kDataTypeCount);
    if (d->type == FrameType::eager) EXPECT_LE(d->length, 64u * 1024);
    if (d->type == FrameType::data) EXPECT_LE(d->offset, limits().max_message - d->length);
  }
  EXPECT_GT(accepted, 0u);  // the sweep also exercised the accepting paths
}

TEST(Frame, HelloRoundTrips) {
  Hello h{0x1122334455667788ull, 3, 8, 1, 2};
  uint8_t buf[kHelloPayload];
  encode_hello(h, buf);
  Hello d = decode_hello(buf);
  EXPECT_EQ(d.token, h.token);
  EXPECT_EQ(d.rank, 3u);
  EXPECT_EQ(d.size, 8u);
  EXPECT_EQ(d.socket_index, 1u);
  EXPECT_EQ(d.sockets_per_peer, 2u);
}

}  // namespace
}  // namespace weft::tcp
