// The handshake and transport messages against published test vectors, byte for byte: the
// IKpsk2 BLAKE2s vectors of cacophony (the Haskell reference implementation's vector file) and
// of flynn/noise (the Go implementation the interop test runs against). Both roles run with the
// vectors' fixed ephemeral keys, so every message must come out identical.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "security/test_util.h"

namespace weft::security {
namespace {

using testing::unhex;

using Vector = std::map<std::string, std::string>;

std::vector<Vector> load(const std::string& file) {
  std::ifstream in(std::string(WEFT_SECURITY_VECTORS) + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  std::vector<Vector> out;
  Vector cur;
  std::string line;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  while (std::getline(in, line)) {
    if (line.empty()) {
      flush();
      continue;
    }
    if (line[0] == '#') continue;
    const auto eq = line.find('=');
    EXPECT_NE(eq, std::string::npos) << line;
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    // The two files name the same things differently.
    if (key == "handshake") key = "protocol_name";
    if (key == "gen_init_ephemeral") key = "init_ephemeral";
    if (key == "gen_resp_ephemeral") key = "resp_ephemeral";
    if (key == "preshared_key") key = "psk";
    cur[key] = line.substr(eq + 1);
  }
  flush();
  return out;
}

void check_vector(const Vector& v) {
  SCOPED_TRACE(v.at("protocol_name") + (v.count("prologue") ? " with prologue" : ""));
  const CipherSuite suite = v.at("protocol_name").find("AESGCM") != std::string::npos
                                ? CipherSuite::aesgcm
                                : CipherSuite::chachapoly;
  ASSERT_EQ(noise_protocol_name(suite), v.at("protocol_name"));
  const auto prologue = v.count("prologue") ? unhex(v.at("prologue")) : std::vector<uint8_t>{};
  const auto psk = unhex(v.at("psk"));
  auto init_s = X25519Keypair::from_private(testing::key_of(unhex(v.at("init_static"))).span());
  auto resp_s = X25519Keypair::from_private(testing::key_of(unhex(v.at("resp_static"))).span());
  ASSERT_TRUE(init_s.ok() && resp_s.ok());
  if (v.count("init_remote_static")) {
    EXPECT_EQ(testing::hex(resp_s->public_key), v.at("init_remote_static"));
  }

  HandshakeConfig ic;
  ic.role = Role::initiator;
  ic.suite = suite;
  ic.prologue = prologue;
  ic.psk = psk;
  ic.local_static = &init_s.value();
  ic.remote_static = resp_s->public_key;
  ic.fixed_ephemeral = testing::key_of(unhex(v.at("init_ephemeral")));
  HandshakeConfig rc = ic;
  rc.role = Role::responder;
  rc.local_static = &resp_s.value();
  rc.remote_static = {};
  rc.fixed_ephemeral = testing::key_of(unhex(v.at("resp_ephemeral")));

  auto init = NoiseHandshake::create(ic);
  auto resp = NoiseHandshake::create(rc);
  ASSERT_TRUE(init.ok() && resp.ok());

  auto m0 = init->write_message1(unhex(v.at("msg_0_payload")));
  ASSERT_TRUE(m0.ok()) << m0.status().to_string();
  EXPECT_EQ(testing::hex(*m0), v.at("msg_0_ciphertext"));
  auto p0 = resp->read_message1(unhex(v.at("msg_0_ciphertext")));
  ASSERT_TRUE(p0.ok()) << p0.status().to_string();
  EXPECT_EQ(testing::hex(*p0), v.at("msg_0_payload"));
  EXPECT_EQ(resp->remote_static(), init_s->public_key);

  auto m1 = resp->write_message2(unhex(v.at("msg_1_payload")));
  ASSERT_TRUE(m1.ok()) << m1.status().to_string();
  EXPECT_EQ(testing::hex(*m1), v.at("msg_1_ciphertext"));
  auto p1 = init->read_message2(unhex(v.at("msg_1_ciphertext")));
  ASSERT_TRUE(p1.ok()) << p1.status().to_string();
  EXPECT_EQ(testing::hex(*p1), v.at("msg_1_payload"));

  if (v.count("handshake_hash")) {
    EXPECT_EQ(testing::hex(init->handshake_hash()), v.at("handshake_hash"));
  }
  EXPECT_EQ(init->handshake_hash(), resp->handshake_hash());
  auto ki = init->split();
  auto kr = resp->split();
  ASSERT_TRUE(ki.ok() && kr.ok());

  // Transport messages: even from the initiator, odd from the responder; nonces count per
  // direction; no associated data (plain Noise CipherState messages).
  auto i_send = Aead::create(suite, ki->send.span());
  auto i_recv = Aead::create(suite, ki->receive.span());
  auto r_send = Aead::create(suite, kr->send.span());
  auto r_recv = Aead::create(suite, kr->receive.span());
  ASSERT_TRUE(i_send.ok() && i_recv.ok() && r_send.ok() && r_recv.ok());
  uint64_t n_i = 0, n_r = 0;
  int checked = 0;
  for (int i = 2; v.count("msg_" + std::to_string(i) + "_payload"); ++i) {
    const auto payload = unhex(v.at("msg_" + std::to_string(i) + "_payload"));
    const auto expect = v.at("msg_" + std::to_string(i) + "_ciphertext");
    const bool from_initiator = i % 2 == 0;
    uint64_t& n = from_initiator ? n_i : n_r;
    Aead& sender = from_initiator ? i_send.value() : r_send.value();
    Aead& receiver = from_initiator ? r_recv.value() : i_recv.value();
    std::vector<uint8_t> ct(payload.size() + kTagBytes);
    ASSERT_TRUE(sender
                    .encrypt(n, {}, {}, payload, ct.data(),
                             std::span<uint8_t, kTagBytes>(ct.data() + payload.size(), kTagBytes))
                    .ok());
    EXPECT_EQ(testing::hex(ct), expect) << "transport message " << i;
    std::vector<uint8_t> pt(payload.size());
    EXPECT_TRUE(receiver.decrypt(
        n, {}, {}, std::span<const uint8_t>(ct).first(payload.size()), pt.data(),
        std::span<const uint8_t, kTagBytes>(ct.data() + payload.size(), kTagBytes)));
    EXPECT_EQ(pt, payload);
    ++n;
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

TEST(NoiseVectors, Cacophony) {
  const auto vectors = load("cacophony_IKpsk2_25519_ChaChaPoly_BLAKE2s.txt");
  ASSERT_EQ(vectors.size(), 1u);
  for (const auto& v : vectors) check_vector(v);
}

TEST(NoiseVectors, FlynnNoise) {
  const auto vectors = load("flynn_IKpsk2_BLAKE2s.txt");
  ASSERT_EQ(vectors.size(), 8u);  // 2 suites x {payloads, prologue, both, neither}
  int aes = 0;
  for (const auto& v : vectors) {
    check_vector(v);
    aes += v.at("protocol_name").find("AESGCM") != std::string::npos;
  }
  EXPECT_EQ(aes, 4);
}

// WireGuard's published constants: Hash(construction) and Hash(Hash(construction) ||
// identifier), an independent check of BLAKE2s and of InitializeSymmetric for this name.
TEST(NoiseVectors, WireGuardConstructionHash) {
  const std::string_view name = noise_protocol_name(CipherSuite::chachapoly);
  Digest c{};
  ASSERT_TRUE(blake2s(Bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size()), {}, c)
                  .ok());
  const Digest expect_c = {96,  226, 109, 174, 243, 39,  239, 192, 46,  195, 53,
                           226, 160, 37,  210, 208, 22,  235, 66,  6,   248, 114,
                           119, 245, 45,  56,  209, 152, 139, 120, 205, 54};
  EXPECT_EQ(c, expect_c);
  const std::string_view id = "WireGuard v1 zx2c4 Jason@zx2c4.com";
  Digest h{};
  ASSERT_TRUE(blake2s(c, Bytes(reinterpret_cast<const uint8_t*>(id.data()), id.size()), h).ok());
  const Digest expect_h = {34,  17,  179, 97,  8,   26,  197, 102, 105, 18,  67,
                           219, 69,  138, 213, 50,  45,  156, 108, 102, 34,  147,
                           232, 183, 14,  225, 156, 101, 186, 7,   158, 243};
  EXPECT_EQ(h, expect_h);
}

}  // namespace
}  // namespace weft::security
