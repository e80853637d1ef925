// The record layer after a real handshake: round trips in both modes and suites, the caller's
// buffer left alone, in-place opening, and everything hostile: changed bytes anywhere, replayed,
// reordered, dropped, truncated and oversize records, rekeying on both sides, the hard stop.
#include <gtest/gtest.h>

#include <numeric>
#include <tuple>

#include "security/test_util.h"

namespace weft::security {
namespace {

struct Link {
  RecordSealer sealer;   // initiator -> responder
  RecordOpener opener;
  RecordSealer back_sealer;  // responder -> initiator
  RecordOpener back_opener;
};

Link make_link(CipherSuite suite, SecurityMode mode, const RecordLimits& limits = {}) {
  testing::HandshakePair pair;
  pair.suite = suite;
  auto keys = testing::run_handshake(pair);
  auto s = RecordSealer::create(suite, mode, keys.initiator.send, limits, "rank 1");
  auto o = RecordOpener::create(suite, mode, keys.responder.receive, limits, "rank 0");
  auto bs = RecordSealer::create(suite, mode, keys.responder.send, limits, "rank 0");
  auto bo = RecordOpener::create(suite, mode, keys.initiator.receive, limits, "rank 1");
  EXPECT_TRUE(s.ok() && o.ok() && bs.ok() && bo.ok());
  return Link{std::move(s).value(), std::move(o).value(), std::move(bs).value(),
              std::move(bo).value()};
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return v;
}

std::vector<uint8_t> seal(RecordSealer& s, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(sealed_size(payload.size()));
  Status st = s.seal(payload, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

class Records : public ::testing::TestWithParam<std::tuple<CipherSuite, SecurityMode>> {
 protected:
  CipherSuite suite() const { return std::get<0>(GetParam()); }
  SecurityMode mode() const { return std::get<1>(GetParam()); }
};

TEST_P(Records, RoundTripBothWaysManySizes) {
  Link link = make_link(suite(), mode());
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4095},
                   size_t{65536}, size_t{1} << 20}) {
    const auto payload = pattern(n, static_cast<uint8_t>(n));
    const auto before = payload;
    auto record = seal(link.sealer, payload);
    EXPECT_EQ(payload, before) << "the sender's buffer was modified";
    if (mode() == SecurityMode::encrypt && n >= 16) {
      EXPECT_NE(std::vector<uint8_t>(record.begin() + 4, record.begin() + 4 + n), payload);
    }
    if (mode() == SecurityMode::auth) {
      EXPECT_EQ(std::vector<uint8_t>(record.begin() + 4, record.begin() + 4 + n), payload);
    }
    auto opened = link.opener.open(record);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    EXPECT_EQ(std::vector<uint8_t>(opened->begin(), opened->end()), payload);
    EXPECT_EQ(opened->data(), record.data() + kRecordHeaderBytes);  // in place

    auto back = seal(link.back_sealer, payload);
    auto opened_back = link.back_opener.open(back);
    ASSERT_TRUE(opened_back.ok());
    EXPECT_EQ(std::vector<uint8_t>(opened_back->begin(), opened_back->end()), payload);
  }
  EXPECT_EQ(link.sealer.records_sealed(), 8u);
  EXPECT_EQ(link.opener.records_opened(), 8u);
}

TEST_P(Records, DetachedPartsIntoAPostedBuffer) {
  Link link = make_link(suite(), mode());
  const auto payload = pattern(100000, 3);
  uint8_t header[kRecordHeaderBytes];
  uint8_t tag[kTagBytes];
  std::vector<uint8_t> body(mode() == SecurityMode::encrypt ? payload.size() : 0);
  ASSERT_TRUE(link.sealer.seal(payload, header, body, tag).ok());
  // The receiver learns the length, receives the body into its posted buffer, opens in place.
  auto length = link.opener.body_size(header);
  ASSERT_TRUE(length.ok());
  ASSERT_EQ(*length, payload.size());
  std::vector<uint8_t> posted = mode() == SecurityMode::encrypt ? body : payload;
  ASSERT_TRUE(link.opener.open(header, posted, tag).ok());
  EXPECT_EQ(posted, payload);
}

TEST_P(Records, SealRefusesAnOverlappingOrMissizedBody) {
  Link link = make_link(suite(), mode());
  auto payload = pattern(64, 1);
  uint8_t header[kRecordHeaderBytes], tag[kTagBytes];
  // encrypt: never into the caller's payload, and exactly its size; auth: no body at all.
  EXPECT_EQ(link.sealer.seal(payload, header, payload, tag).code(), ErrorCode::invalid_argument);
  std::vector<uint8_t> small(63);
  EXPECT_EQ(link.sealer.seal(payload, header, small, tag).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(link.sealer.records_sealed(), 0u);
}

TEST_P(Records, EveryFlippedBitFailsAndNothingIsDelivered) {
  Link probe = make_link(suite(), mode());
  const auto payload = pattern(40, 9);
  const auto good = seal(probe.sealer, payload);
  for (size_t i = 0; i < good.size(); ++i) {
    Link link = make_link(suite(), mode());  // same fixed keys: the same record
    auto bad = good;
    bad[i] ^= static_cast<uint8_t>(1u << (i % 8));
    auto opened = link.opener.open(bad);
    ASSERT_FALSE(opened.ok()) << "byte " << i;
    EXPECT_EQ(opened.status().code(), ErrorCode::protocol);
    EXPECT_NE(opened.status().message().find("rank 0"), std::string::npos)
        << opened.status().message();
    // Nothing of its body stays in the buffer (auth mode would otherwise leave the clear
    // payload there, encrypt mode the unauthenticated plaintext).
    EXPECT_EQ(std::count(bad.begin() + kRecordHeaderBytes, bad.end() - kTagBytes, 0),
              static_cast<long>(payload.size()));
    // And the link is over: even the genuine record is refused now.
    auto again = good;
    EXPECT_FALSE(link.opener.open(again).ok());
  }
}

TEST_P(Records, ReplayReorderDropAndTruncationFail) {
  {  // replay
    Link link = make_link(suite(), mode());
    auto r0 = seal(link.sealer, pattern(10, 1));
    auto copy = r0;
    ASSERT_TRUE(link.opener.open(r0).ok());
    EXPECT_FALSE(link.opener.open(copy).ok());
  }
  {  // reorder
    Link link = make_link(suite(), mode());
    auto r0 = seal(link.sealer, pattern(10, 1));
    auto r1 = seal(link.sealer, pattern(10, 2));
    EXPECT_FALSE(link.opener.open(r1).ok());
  }
  {  // a dropped record
    Link link = make_link(suite(), mode());
    auto r0 = seal(link.sealer, pattern(10, 1));
    auto r1 = seal(link.sealer, pattern(10, 2));
    auto r2 = seal(link.sealer, pattern(10, 3));
    ASSERT_TRUE(link.opener.open(r0).ok());
    EXPECT_FALSE(link.opener.open(r2).ok());
  }
  {  // truncated: fewer body bytes than the header says, and shorter than a header and tag
    Link link = make_link(suite(), mode());
    auto r0 = seal(link.sealer, pattern(100, 1));
    r0.resize(r0.size() - 1);
    auto opened = link.opener.open(r0);
    ASSERT_FALSE(opened.ok());
    EXPECT_NE(opened.status().message().find("truncated"), std::string::npos);
    Link link2 = make_link(suite(), mode());
    std::vector<uint8_t> tiny(kRecordOverhead - 1, 0);
    EXPECT_FALSE(link2.opener.open(tiny).ok());
  }
  {  // the wrong direction's record (reflected back to its sender)
    Link link = make_link(suite(), mode());
    auto r0 = seal(link.sealer, pattern(10, 1));
    EXPECT_FALSE(link.back_opener.open(r0).ok());
  }
}

TEST_P(Records, OversizeLengthIsRefusedBeforeTheBody) {
  RecordLimits limits;
  limits.max_record = 1000;
  Link link = make_link(suite(), mode(), limits);
  uint8_t header[kRecordHeaderBytes] = {0xe9, 0x03, 0, 0};  // 1001
  auto n = link.opener.body_size(header);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), ErrorCode::protocol);
  uint8_t ok_header[kRecordHeaderBytes] = {0xe8, 0x03, 0, 0};  // 1000
  EXPECT_FALSE(link.opener.body_size(ok_header).ok());  // the link is over after a bad header
  Link fresh = make_link(suite(), mode(), limits);
  EXPECT_TRUE(fresh.opener.body_size(ok_header).ok());
  uint8_t max_header[kRecordHeaderBytes] = {0xff, 0xff, 0xff, 0xff};
  EXPECT_FALSE(fresh.opener.body_size(max_header).ok());
  // The sealer keeps to the same limit.
  std::vector<uint8_t> out(sealed_size(1001));
  EXPECT_EQ(link.sealer.seal(pattern(1001, 0), out).code(), ErrorCode::invalid_argument);
}

TEST_P(Records, RekeyIsCrossedInStepOnBothSides) {
  RecordLimits limits;
  limits.rekey_interval = 3;
  Link link = make_link(suite(), mode(), limits);
  // Without rekeying, record 3 would be sealed with the first key; check it is not.
  Link plain = make_link(suite(), mode());
  for (int i = 0; i < 10; ++i) {
    const auto payload = pattern(33, static_cast<uint8_t>(i));
    auto record = seal(link.sealer, payload);
    auto unrekeyed = seal(plain.sealer, payload);
    if (i < 3) {
      EXPECT_EQ(record, unrekeyed) << i;
    } else {
      EXPECT_NE(record, unrekeyed) << i;
    }
    auto opened = link.opener.open(record);
    ASSERT_TRUE(opened.ok()) << "record " << i << ": " << opened.status().to_string();
    EXPECT_EQ(std::vector<uint8_t>(opened->begin(), opened->end()), payload);
    auto back = seal(link.back_sealer, payload);
    ASSERT_TRUE(link.back_opener.open(back).ok()) << "back record " << i;
  }
  // An opener that does not rekey in step cannot read record 3.
  Link mismatched = make_link(suite(), mode(), limits);
  RecordLimits other = limits;
  other.rekey_interval = 4;
  testing::HandshakePair pair;
  pair.suite = suite();
  auto keys = testing::run_handshake(pair);
  auto opener = RecordOpener::create(suite(), mode(), keys.responder.receive, other, "rank 0");
  ASSERT_TRUE(opener.ok());
  for (int i = 0; i < 4; ++i) {
    auto record = seal(mismatched.sealer, pattern(8, 0));
    EXPECT_EQ(opener->open(record).ok(), i < 3) << i;
  }
}

TEST_P(Records, HardStopBeforeTheCounterRunsOut) {
  RecordLimits limits;
  limits.max_records = 5;
  Link link = make_link(suite(), mode(), limits);
  for (int i = 0; i < 5; ++i) {
    auto record = seal(link.sealer, pattern(4, 0));
    ASSERT_TRUE(link.opener.open(record).ok());
  }
  std::vector<uint8_t> out(sealed_size(4));
  Status st = link.sealer.seal(pattern(4, 0), out);
  EXPECT_EQ(st.code(), ErrorCode::protocol);
  EXPECT_NE(st.message().find("re-established"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    SuitesAndModes, Records,
    ::testing::Combine(::testing::Values(CipherSuite::chachapoly, CipherSuite::aesgcm),
                       ::testing::Values(SecurityMode::auth, SecurityMode::encrypt)),
    [](const auto& info) {
      return std::string(to_string(std::get<0>(info.param))) + "_" +
             to_string(std::get<1>(info.param));
    });

TEST(RecordSetup, RefusesModeOffAndBadLimits) {
  Key key = testing::counting_key(1);
  EXPECT_FALSE(RecordSealer::create(CipherSuite::chachapoly, SecurityMode::off, key, {}, "x").ok());
  RecordLimits bad;
  bad.rekey_interval = 0;
  EXPECT_FALSE(RecordOpener::create(CipherSuite::aesgcm, SecurityMode::encrypt, key, bad, "x").ok());
  bad = {};
  bad.max_record = size_t{1} << 31;
  EXPECT_FALSE(RecordOpener::create(CipherSuite::aesgcm, SecurityMode::encrypt, key, bad, "x").ok());
}

TEST(RecordSetup, AuthAndEncryptRecordsDoNotOpenAsEachOther) {
  testing::HandshakePair pair;
  auto keys = testing::run_handshake(pair);
  auto s = RecordSealer::create(pair.suite, SecurityMode::auth, keys.initiator.send, {}, "a");
  auto o = RecordOpener::create(pair.suite, SecurityMode::encrypt, keys.responder.receive, {}, "b");
  auto record = seal(s.value(), pattern(64, 5));
  EXPECT_FALSE(o->open(record).ok());
}

}  // namespace
}  // namespace weft::security
