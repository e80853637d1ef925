// The Noise handshake between two weft ends: what completes, what must fail (wrong pre-shared
// key, wrong static key, another job's prologue, any changed byte of either message), and the
// preamble that names the suite and the mode.
#include <gtest/gtest.h>

#include "security/test_util.h"

namespace weft::security {
namespace {

using testing::HandshakePair;
using testing::run_handshake;

class Handshake : public ::testing::TestWithParam<CipherSuite> {};

TEST_P(Handshake, CompletesWithPayloadsAndAgrees) {
  HandshakePair pair;
  pair.suite = GetParam();
  pair.fixed_ephemerals = false;  // the real path: fresh ephemeral keys
  const std::vector<uint8_t> hello(24, 0x5a), ack = {1, 2, 3};
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  ASSERT_TRUE(init.ok() && resp.ok());
  auto m1 = init->write_message1(hello);
  ASSERT_TRUE(m1.ok());
  EXPECT_EQ(m1->size(), NoiseHandshake::message1_size(hello.size()));
  auto p1 = resp->read_message1(*m1);
  ASSERT_TRUE(p1.ok()) << p1.status().to_string();
  EXPECT_EQ(*p1, hello);
  EXPECT_EQ(resp->remote_static(), pair.initiator_static.public_key);
  auto m2 = resp->write_message2(ack);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(m2->size(), NoiseHandshake::message2_size(ack.size()));
  auto p2 = init->read_message2(*m2);
  ASSERT_TRUE(p2.ok()) << p2.status().to_string();
  EXPECT_EQ(*p2, ack);
  auto ki = init->split();
  auto kr = resp->split();
  ASSERT_TRUE(ki.ok() && kr.ok());
  EXPECT_EQ(testing::hex(ki->send.span()), testing::hex(kr->receive.span()));
  EXPECT_EQ(testing::hex(ki->receive.span()), testing::hex(kr->send.span()));
  EXPECT_NE(testing::hex(ki->send.span()), testing::hex(ki->receive.span()));
  EXPECT_EQ(ki->handshake_hash, kr->handshake_hash);
  EXPECT_EQ(kr->remote_static, pair.initiator_static.public_key);
  EXPECT_FALSE(init->split().ok());  // once
}

TEST_P(Handshake, FreshEphemeralsGiveFreshKeys) {
  HandshakePair pair;
  pair.suite = GetParam();
  pair.fixed_ephemerals = false;
  auto a = run_handshake(pair);
  auto b = run_handshake(pair);
  EXPECT_NE(testing::hex(a.initiator.send.span()), testing::hex(b.initiator.send.span()));
}

TEST_P(Handshake, WrongPreSharedKeyFailsAtMessage2) {
  HandshakePair pair;
  pair.suite = GetParam();
  pair.responder_psk = testing::counting_key(0x81);
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  auto m1 = init->write_message1({});
  // psk2: message 1 does not depend on the pre-shared key, message 2 does.
  ASSERT_TRUE(resp->read_message1(*m1).ok());
  auto m2 = resp->write_message2({});
  ASSERT_TRUE(m2.ok());
  auto p2 = init->read_message2(*m2);
  ASSERT_FALSE(p2.ok());
  EXPECT_EQ(p2.status().code(), ErrorCode::protocol);
  EXPECT_NE(p2.status().message().find("failed authentication"), std::string::npos);
  EXPECT_FALSE(init->split().ok());
}

TEST_P(Handshake, InitiatorWithTheWrongResponderKeyFailsAtMessage1) {
  HandshakePair pair;
  pair.suite = GetParam();
  pair.initiator_knows_responder = testing::keypair(0x41).public_key;
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  auto m1 = init->write_message1({});
  ASSERT_TRUE(m1.ok());
  auto p1 = resp->read_message1(*m1);
  ASSERT_FALSE(p1.ok());
  EXPECT_EQ(p1.status().code(), ErrorCode::protocol);
  EXPECT_FALSE(resp->write_message2({}).ok());  // a failed handshake stays failed
}

TEST_P(Handshake, ImpostorStaticKeyIsVisibleToTheResponder) {
  // Anyone may send message 1 with their own static key; the responder learns that key and
  // must compare it with the store's record for the claimed rank. Without the job key the
  // impostor still cannot finish (next test).
  HandshakePair pair;
  pair.suite = GetParam();
  pair.initiator_static = testing::keypair(0x11);
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  auto m1 = init->write_message1({});
  ASSERT_TRUE(resp->read_message1(*m1).ok());
  EXPECT_NE(resp->remote_static(), testing::keypair(0x10).public_key);
  EXPECT_EQ(resp->remote_static(), testing::keypair(0x11).public_key);
}

TEST_P(Handshake, ImpostorWithoutTheJobKeyCannotFinish) {
  HandshakePair pair;
  pair.suite = GetParam();
  pair.initiator_psk = testing::counting_key(0x99);
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  auto m1 = init->write_message1({});
  ASSERT_TRUE(resp->read_message1(*m1).ok());
  auto m2 = resp->write_message2({});
  EXPECT_FALSE(init->read_message2(*m2).ok());
}

TEST_P(Handshake, OtherPrologueFailsAtMessage1) {
  HandshakePair pair;
  pair.suite = GetParam();
  pair.responder_prologue = {'j', 'o', 'c'};
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  auto m1 = init->write_message1({});
  EXPECT_FALSE(resp->read_message1(*m1).ok());
}

TEST_P(Handshake, EveryFlippedByteOfMessage1Fails) {
  HandshakePair pair;
  pair.suite = GetParam();
  const std::vector<uint8_t> hello(24, 7);
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto m1 = init->write_message1(hello);
  ASSERT_TRUE(m1.ok());
  for (size_t i = 0; i < m1->size(); ++i) {
    auto bad = *m1;
    bad[i] ^= 0x01;
    auto resp = NoiseHandshake::create(pair.config(Role::responder));
    EXPECT_FALSE(resp->read_message1(bad).ok()) << "byte " << i;
  }
  // Truncated and extended.
  for (size_t cut : {size_t{1}, size_t{16}, m1->size() - 1}) {
    auto resp = NoiseHandshake::create(pair.config(Role::responder));
    EXPECT_FALSE(resp->read_message1(std::span<const uint8_t>(*m1).first(m1->size() - cut)).ok());
  }
  auto longer = *m1;
  longer.push_back(0);
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  EXPECT_FALSE(resp->read_message1(longer).ok());
}

TEST_P(Handshake, EveryFlippedByteOfMessage2Fails) {
  HandshakePair pair;
  pair.suite = GetParam();
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  auto first = NoiseHandshake::create(pair.config(Role::initiator));
  auto m1 = first->write_message1({});
  ASSERT_TRUE(resp->read_message1(*m1).ok());
  auto m2 = resp->write_message2(std::vector<uint8_t>{9, 9});
  ASSERT_TRUE(m2.ok());
  for (size_t i = 0; i < m2->size(); ++i) {
    auto bad = *m2;
    bad[i] ^= 0x80;
    // Fixed ephemerals: a new initiator writes the same message 1 and expects this message 2.
    auto init = NoiseHandshake::create(pair.config(Role::initiator));
    ASSERT_TRUE(init->write_message1({}).ok());
    EXPECT_FALSE(init->read_message2(bad).ok()) << "byte " << i;
  }
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  ASSERT_TRUE(init->write_message1({}).ok());
  EXPECT_TRUE(init->read_message2(*m2).ok());  // the unchanged message still works
}

TEST_P(Handshake, OversizePayloadsAndOrderAreRefused) {
  HandshakePair pair;
  pair.suite = GetParam();
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  const std::vector<uint8_t> big(kMaxHandshakePayload + 1);
  EXPECT_EQ(init->write_message1(big).status().code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(resp->write_message2({}).ok());   // before message 1
  EXPECT_FALSE(init->read_message2({}).ok());    // before message 1 was written
  EXPECT_FALSE(resp->split().ok());
  const std::vector<uint8_t> huge(NoiseHandshake::message1_size(kMaxHandshakePayload) + 1);
  EXPECT_EQ(resp->read_message1(huge).status().code(), ErrorCode::protocol);
}

TEST_P(Handshake, SmallOrderEphemeralIsRefused) {
  HandshakePair pair;
  pair.suite = GetParam();
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  std::vector<uint8_t> m1(NoiseHandshake::message1_size(0), 0);  // e = 0: a point of order 1
  auto p = resp->read_message1(m1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::protocol);
}

INSTANTIATE_TEST_SUITE_P(Suites, Handshake,
                         ::testing::Values(CipherSuite::chachapoly, CipherSuite::aesgcm),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Preamble, RoundTripsAndRefusesStrangers) {
  for (auto suite : {CipherSuite::chachapoly, CipherSuite::aesgcm}) {
    for (auto mode : {SecurityMode::auth, SecurityMode::encrypt}) {
      auto bytes = encode_preamble({suite, mode});
      auto back = decode_preamble(bytes);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(back->suite, suite);
      EXPECT_EQ(back->mode, mode);
    }
  }
  auto good = encode_preamble({CipherSuite::aesgcm, SecurityMode::encrypt});
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= 0x40;
    EXPECT_FALSE(decode_preamble(bad).ok()) << "byte " << i;
  }
  auto off = encode_preamble({CipherSuite::chachapoly, SecurityMode::off});
  EXPECT_FALSE(decode_preamble(off).ok());
}

TEST(Preamble, SuiteAndModeAreBoundByThePrologue) {
  const std::vector<uint8_t> job = {'t', 'o', 'k'};
  auto a = build_prologue({CipherSuite::chachapoly, SecurityMode::encrypt}, job);
  auto b = build_prologue({CipherSuite::chachapoly, SecurityMode::auth}, job);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kPreambleBytes + 2 + job.size());
  HandshakePair pair;
  pair.initiator_prologue = *a;
  pair.responder_prologue = *b;
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  EXPECT_FALSE(resp->read_message1(init->write_message1({}).value()).ok());
  EXPECT_FALSE(build_prologue({}, std::vector<uint8_t>(kMaxJobBinding + 1)).ok());
}

TEST(Suite, ChoiceAndNames) {
  EXPECT_EQ(choose_suite(true, true), CipherSuite::aesgcm);
  EXPECT_EQ(choose_suite(true, false), CipherSuite::chachapoly);
  EXPECT_EQ(choose_suite(false, true), CipherSuite::chachapoly);
  EXPECT_EQ(parse_security_mode("auth"), SecurityMode::auth);
  EXPECT_EQ(parse_security_mode("encrypt"), SecurityMode::encrypt);
  EXPECT_EQ(parse_security_mode("off"), SecurityMode::off);
  EXPECT_FALSE(parse_security_mode("Encrypt").has_value());
  (void)cpu_has_aes_acceleration();  // answers without crashing on any CPU
}

}  // namespace
}  // namespace weft::security
