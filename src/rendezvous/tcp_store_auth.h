// Authentication of the TCP store with the job key (docs/rendezvous.md, "Authentication").
//
// The ping exchange carries a fresh nonce from each end. With a key, both ends derive
//   store_key          = HKDF(job_key, "weft store v2")            (never the job key itself)
//   c2s_key, s2c_key   = HKDF(store_key, client_nonce || server_nonce)
// and every later frame, both directions, travels as one record of the security module in `auth`
// mode (ChaChaPoly, security/record.h): its MAC covers the frame, and its implicit counter makes a
// request replayed within a connection, or recorded on another one (other nonces, other keys),
// fail. Pure functions and values; no sockets.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "rendezvous/tcp_store_protocol.h"
#include "security/job_key.h"
#include "security/record.h"
#include "rendezvous/tcp_store_keyed.h"
#include "weft/status.h"

namespace weft::tcp_store {

using Nonce = std::array<uint8_t, kNonceBytes>;

// The record layer of one authenticated connection, for one end.
struct Session {
  security::RecordSealer sealer;  // frames this end sends
  security::RecordOpener opener;  // frames this end receives
};

// Largest record body: a whole frame (length prefix and payload).
inline constexpr size_t kMaxRecordBody = kLengthBytes + kMaxPayloadBytes;

Result<Nonce> random_nonce();
Result<Session> make_session(const security::JobKey& key, bool server, const Nonce& client,
                             const Nonce& server_nonce, std::string peer);

}  // namespace weft::tcp_store

