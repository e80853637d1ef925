// The secured set-up of one TCP socket (docs/security.md, "Handshake"): the static key in the
// address record, the initiator's preamble + message 1 (the HELLO inside) and its confirmation
// record, the responder's checks. No I/O here: bytes in, bytes out; mesh.cc moves them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "security/noise.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/mesh.h"

namespace weft::tcp {


// Bytes the responder reads before it can answer: preamble || message 1 with the HELLO.
inline constexpr size_t kSecureHelloBytes =
    security::kPreambleBytes + security::NoiseHandshake::message1_size(kHelloPayload);
inline constexpr size_t kSecureAnswerBytes = security::NoiseHandshake::message2_size(0);
inline constexpr size_t kConfirmBytes = security::sealed_size(0);

// The job binding of every handshake of a communicator: its token (u64 little-endian).
std::array<uint8_t, 8> job_binding(uint64_t token);

// The local identity of a secured mesh.
struct LocalSecurity {
  security::SecurityMode mode = security::SecurityMode::off;
  std::shared_ptr<const security::JobKey> job_key;
  security::X25519Keypair static_key;
  bool has_aes = false;
};

// Initiator of one socket: start() gives preamble || message 1, finish() reads message 2 and
// gives the record layer with the confirmation record to send.
class SecureInitiator {
 public:
  static Result<SecureInitiator> start(const LocalSecurity& local, const StaticKeyRecord& peer,
                                       uint64_t token, const Hello& hello, int peer_rank,
                                       std::vector<uint8_t>& out);
  Status finish(std::span<const uint8_t> message2, LinkCrypto& crypto,
                std::vector<uint8_t>& confirm);

 private:
  SecureInitiator(security::NoiseHandshake hs, security::SecurityMode mode, int peer)
      : hs_(std::move(hs)), mode_(mode), peer_(peer) {}
  security::NoiseHandshake hs_;
  security::SecurityMode mode_;
  int peer_;
};

// Responder of one socket. open() takes preamble || message 1 and returns the claimed HELLO and
// the initiator's static key (unauthenticated until confirm() succeeds) and message 2 to send.
class SecureResponder {
 public:
  struct Opened {
    Hello hello;
    security::PublicKey initiator_key{};
    std::vector<uint8_t> answer;  // message 2
  };
  static Result<SecureResponder> create(const LocalSecurity& local, uint64_t token,
                                        std::span<const uint8_t, kSecureHelloBytes> first,
                                        Opened& opened);
  // The confirmation record: proves the initiator holds the job key (psk2) and finished.
  Status confirm(std::span<uint8_t, kConfirmBytes> record, int rank, LinkCrypto& crypto);

 private:
  SecureResponder() = default;
  LinkCrypto crypto_;  // made once message 2 is written
};

}  // namespace weft::tcp
