// Helpers of the security tests: hex, fixed keys, and a handshake run in memory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "security/noise.h"
#include "security/primitives.h"
#include "security/record.h"

namespace weft::security::testing {

inline std::vector<uint8_t> unhex(std::string_view hex) {
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    const int hi = value(hex[i]), lo = value(hex[i + 1]);
    EXPECT_GE(hi, 0);
    EXPECT_GE(lo, 0);
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  EXPECT_EQ(hex.size() % 2, 0u);
  return out;
}

inline std::string hex(std::span<const uint8_t> bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

inline Key key_of(std::span<const uint8_t> bytes) {
  EXPECT_EQ(bytes.size(), kKeyBytes);
  Key k;
  if (bytes.size() == kKeyBytes) k.assign(bytes.first<kKeyBytes>());
  return k;
}

// A deterministic 32-byte value: seed, seed+1, ...
inline Key counting_key(uint8_t seed) {
  Key k;
  for (size_t i = 0; i < kKeyBytes; ++i) k.data()[i] = static_cast<uint8_t>(seed + i);
  return k;
}

inline X25519Keypair keypair(uint8_t seed) {
  auto kp = X25519Keypair::from_private(counting_key(seed).span());
  EXPECT_TRUE(kp.ok()) << kp.status().to_string();
  return kp.ok() ? kp.value() : X25519Keypair{};
}

// Two ends of one handshake, configured consistently; tests change fields before start().
struct HandshakePair {
  CipherSuite suite = CipherSuite::chachapoly;
  X25519Keypair initiator_static = keypair(0x10);
  X25519Keypair responder_static = keypair(0x40);
  Key initiator_psk = counting_key(0x80);
  Key responder_psk = counting_key(0x80);
  std::vector<uint8_t> initiator_prologue = {'j', 'o', 'b'};
  std::vector<uint8_t> responder_prologue = {'j', 'o', 'b'};
  PublicKey initiator_knows_responder{};  // defaults to responder_static.public_key
  bool fixed_ephemerals = true;

  HandshakeConfig config(Role role) {
    HandshakeConfig c;
    c.role = role;
    c.suite = suite;
    if (role == Role::initiator) {
      c.prologue = initiator_prologue;
      c.psk = initiator_psk.span();
      c.local_static = &initiator_static;
      c.remote_static = initiator_knows_responder == PublicKey{} ? responder_static.public_key
                                                                 : initiator_knows_responder;
      if (fixed_ephemerals) c.fixed_ephemeral = counting_key(0x20);
    } else {
      c.prologue = responder_prologue;
      c.psk = responder_psk.span();
      c.local_static = &responder_static;
      if (fixed_ephemerals) c.fixed_ephemeral = counting_key(0x60);
    }
    return c;
  }
};

struct Finished {
  TransportKeys initiator;
  TransportKeys responder;
};

// Runs the whole handshake, asserting every step succeeds.
inline Finished run_handshake(HandshakePair& pair, std::span<const uint8_t> payload1 = {},
                              std::span<const uint8_t> payload2 = {}) {
  auto init = NoiseHandshake::create(pair.config(Role::initiator));
  auto resp = NoiseHandshake::create(pair.config(Role::responder));
  EXPECT_TRUE(init.ok() && resp.ok());
  auto m1 = init->write_message1(payload1);
  EXPECT_TRUE(m1.ok()) << m1.status().to_string();
  auto p1 = resp->read_message1(m1.value());
  EXPECT_TRUE(p1.ok()) << p1.status().to_string();
  auto m2 = resp->write_message2(payload2);
  EXPECT_TRUE(m2.ok()) << m2.status().to_string();
  auto p2 = init->read_message2(m2.value());
  EXPECT_TRUE(p2.ok()) << p2.status().to_string();
  auto ki = init->split();
  auto kr = resp->split();
  EXPECT_TRUE(ki.ok() && kr.ok());
  return Finished{ki.value(), kr.value()};
}

}  // namespace weft::security::testing
