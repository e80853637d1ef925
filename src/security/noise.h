// The Noise handshake of a secured link: Noise_IKpsk2_25519_{ChaChaPoly,AESGCM}_BLAKE2s
// (revision 34 of the Noise specification; WireGuard's pattern), as two messages:
//
//   <- s                                  (the responder's static key, from its store record)
//   ...
//   -> e, es, s, ss, {payload}            message 1: the initiator's HELLO rides in the payload
//   <- e, ee, se, psk, {payload}          message 2
//
// then Split() gives one key per direction for the record layer (record.h). The pre-shared key
// is the job key (psk2: mixed in by message 2), so message 1 is authenticated only by the
// static keys: the responder must treat the link as the peer's only after the first record from
// the initiator opens (which proves the initiator holds the job key), and must check that the
// initiator's static key (remote_static() after message 1) is the one its store record names
// for the rank the payload claims. A replayed message 1 leads nowhere: the replayer cannot
// complete the handshake without the ephemeral key.
//
// What both ends must agree on before message 1 travels in the prologue: the preamble (cipher
// suite and security mode, sent in clear ahead of message 1 so the responder knows which
// protocol name to start) and the job binding (e.g. the job's token), so a message meant for
// another job or another mode fails. Formats: docs/security.md.
//
// A NoiseHandshake is used by one thread at a time; every failure is final (later calls fail).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "security/job_key.h"
#include "security/primitives.h"
#include "security/suite.h"
#include "weft/status.h"

namespace weft::security {

inline constexpr size_t kPreambleBytes = 8;
inline constexpr size_t kMaxHandshakePayload = 1024;
inline constexpr size_t kMaxJobBinding = 1024;

// Sent in clear before message 1 and repeated as the first bytes of the prologue:
// "WNZ" 0x01 (magic and version), suite, mode, two zero bytes.
struct Preamble {
  CipherSuite suite = CipherSuite::chachapoly;
  SecurityMode mode = SecurityMode::encrypt;
};
std::array<uint8_t, kPreambleBytes> encode_preamble(const Preamble& preamble);
// Refuses a wrong magic or version, an unknown suite, mode `off` or an unknown mode, nonzero
// reserved bytes (ErrorCode::protocol).
Result<Preamble> decode_preamble(std::span<const uint8_t, kPreambleBytes> bytes);
// The prologue: the encoded preamble, the binding's length (u16 little-endian), the binding.
Result<std::vector<uint8_t>> build_prologue(const Preamble& preamble,
                                            std::span<const uint8_t> job_binding);

enum class Role : uint8_t { initiator, responder };

struct HandshakeConfig {
  Role role = Role::initiator;
  CipherSuite suite = CipherSuite::chachapoly;
  std::span<const uint8_t> prologue;
  std::span<const uint8_t> psk;                   // the job key (32 bytes)
  const X25519Keypair* local_static = nullptr;    // this rank's static key (required)
  PublicKey remote_static{};                      // initiator: the responder's static key
  std::optional<Key> fixed_ephemeral;             // tests only: this side's ephemeral private key
};

// The result of a finished handshake: one key per direction and the handshake hash (a channel
// binding both ends share).
struct TransportKeys {
  CipherSuite suite = CipherSuite::chachapoly;
  Key send;
  Key receive;
  Digest handshake_hash{};
  PublicKey remote_static{};
};

class NoiseHandshake {
 public:
  static Result<NoiseHandshake> create(const HandshakeConfig& config);

  static constexpr size_t message1_size(size_t payload) {
    return kKeyBytes + (kKeyBytes + kTagBytes) + payload + kTagBytes;
  }
  static constexpr size_t message2_size(size_t payload) { return kKeyBytes + payload + kTagBytes; }

  // Initiator: message 1 with `payload` (at most kMaxHandshakePayload bytes).
  Result<std::vector<uint8_t>> write_message1(Bytes payload);
  // Responder: message 1's payload; remote_static() is the initiator's key from then on.
  Result<std::vector<uint8_t>> read_message1(Bytes message);
  // Responder: message 2 with `payload`.
  Result<std::vector<uint8_t>> write_message2(Bytes payload);
  // Initiator: message 2's payload.
  Result<std::vector<uint8_t>> read_message2(Bytes message);
  // After message 2 (either side): the transport keys, once.
  Result<TransportKeys> split();

  const PublicKey& remote_static() const { return rs_; }
  const Digest& handshake_hash() const { return h_; }

 private:
  enum class Step : uint8_t { message1, message2, split, done, failed };

  explicit NoiseHandshake(const HandshakeConfig& config);
  Status mix_hash(Bytes data);
  Status mix_key(Bytes ikm);
  Status mix_key_and_hash(Bytes ikm);
  Status initialize_key(const Key& key);
  Status encrypt_and_hash(Bytes plaintext, std::vector<uint8_t>& out);
  Status decrypt_and_hash(Bytes ciphertext, std::vector<uint8_t>& out);
  Status make_ephemeral();
  Status dh_into_key(const X25519Keypair& mine, const PublicKey& public_key);
  Status check_step(Step expected, Role role, const char* what) const;
  template <typename T>
  Result<T> fail(Status status);

  Role role_;
  CipherSuite suite_;
  Step step_ = Step::message1;
  Key ck_;
  Digest h_{};
  std::optional<Aead> k_;  // absent until the first MixKey
  uint64_t n_ = 0;
  Key psk_;
  X25519Keypair s_;
  X25519Keypair e_;
  std::optional<Key> fixed_ephemeral_;
  PublicKey rs_{};
  PublicKey re_{};
};

}  // namespace weft::security
