// libFuzzer target: the Noise handshake messages, with valid keys so the fuzzer reaches past
// authentication. The first input byte picks the suite and a scenario; the rest is data:
//   0: a genuine message 1 carrying the data as payload, then message 2 carrying it reversed:
//      both must open and the two ends must agree on keys and handshake hash;
//   1: a genuine message 1 changed by the data (XOR mask, then cut or extended by a length):
//      it must open exactly when the change is no change;
//   2: the same for message 2;
//   3: the data itself as message 1 (and its first bytes as a preamble): must be refused.
// Every oracle failure aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "security/noise.h"

namespace {

using namespace weft::security;

Key key(uint8_t seed) {
  Key k;
  for (size_t i = 0; i < kKeyBytes; ++i) k.data()[i] = static_cast<uint8_t>(seed + 3 * i);
  return k;
}

void require(bool ok) {
  if (!ok) std::abort();
}

struct Ends {
  X25519Keypair is = X25519Keypair::from_private(key(1).span()).value();
  X25519Keypair rs = X25519Keypair::from_private(key(2).span()).value();
  Key psk = key(3);
  std::vector<uint8_t> prologue = {'f', 'u', 'z', 'z'};

  NoiseHandshake make(Role role, CipherSuite suite) {
    HandshakeConfig c;
    c.role = role;
    c.suite = suite;
    c.prologue = prologue;
    c.psk = psk.span();
    c.local_static = role == Role::initiator ? &is : &rs;
    c.remote_static = rs.public_key;
    c.fixed_ephemeral = key(role == Role::initiator ? 4 : 5);
    return NoiseHandshake::create(c).value();
  }
};

// Applies the change the data describes: data = cut (1 byte) || mask bytes.
std::vector<uint8_t> mutate(const std::vector<uint8_t>& msg, const uint8_t* data, size_t size) {
  std::vector<uint8_t> out = msg;
  if (size == 0) return out;
  const uint8_t cut = data[0];
  for (size_t i = 1; i < size && i - 1 < out.size(); ++i) out[i - 1] ^= data[i];
  if (cut < 64) {
    out.resize(out.size() > cut ? out.size() - cut : 0);
  } else if (cut > 250) {
    out.push_back(cut);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static Ends ends;
  const CipherSuite suite = (data[0] & 1) ? CipherSuite::aesgcm : CipherSuite::chachapoly;
  const int scenario = (data[0] >> 1) & 3;
  ++data;
  --size;
  const std::vector<uint8_t> payload(data, data + (size < kMaxHandshakePayload ? size : kMaxHandshakePayload));

  auto init = ends.make(Role::initiator, suite);
  auto resp = ends.make(Role::responder, suite);
  switch (scenario) {
    case 0: {
      auto m1 = init.write_message1(payload);
      require(m1.ok());
      auto p1 = resp.read_message1(m1.value());
      require(p1.ok() && p1.value() == payload && resp.remote_static() == ends.is.public_key);
      std::vector<uint8_t> reversed(payload.rbegin(), payload.rend());
      auto m2 = resp.write_message2(reversed);
      require(m2.ok());
      auto p2 = init.read_message2(m2.value());
      require(p2.ok() && p2.value() == reversed);
      auto ki = init.split();
      auto kr = resp.split();
      require(ki.ok() && kr.ok());
      require(ki->handshake_hash == kr->handshake_hash);
      require(std::equal(ki->send.data(), ki->send.data() + kKeyBytes, kr->receive.data()));
      break;
    }
    case 1: {
      const std::vector<uint8_t> hello(24, 0x42);
      auto m1 = init.write_message1(hello);
      require(m1.ok());
      const auto changed = mutate(m1.value(), data, size);
      auto p1 = resp.read_message1(changed);
      require(p1.ok() == (changed == m1.value()));
      break;
    }
    case 2: {
      auto m1 = init.write_message1({});
      require(m1.ok() && resp.read_message1(m1.value()).ok());
      auto m2 = resp.write_message2(std::vector<uint8_t>{7, 7, 7});
      require(m2.ok());
      const auto changed = mutate(m2.value(), data, size);
      auto p2 = init.read_message2(changed);
      require(p2.ok() == (changed == m2.value()));
      if (p2.ok()) require(init.split().ok());
      break;
    }
    default: {
      if (size >= kPreambleBytes) {
        (void)decode_preamble(std::span<const uint8_t, kPreambleBytes>(data, kPreambleBytes));
      }
      auto p1 = resp.read_message1(std::span<const uint8_t>(data, size));
      require(!p1.ok());
      break;
    }
  }
  return 0;
}
