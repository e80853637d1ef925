// The record layer of a secured link: after the Noise handshake (noise.h), every frame travels
// as one record sealed with the direction's key and an implicit nonce, the count of records
// sent before it in that direction (TCP keeps them in order, so nothing of the nonce travels).
//
//   record := length:u32le  body[length]  tag[16]
//   encrypt: body = ENCRYPT(k, n, ad = length, payload)       (AEAD of the suite)
//   auth:    body = payload; tag = ENCRYPT(k, n, ad = length || payload, empty)
//
// The length is authenticated (it is associated data), so a changed, replayed, reordered,
// dropped or cut record fails to open: the counter or the bytes no longer match. Both ends
// rekey (Noise REKEY) every `rekey_interval` records at the same counter, with no message,
// and stop before the counter could wrap. docs/security.md has the grammar and the reasoning.
//
// Zero copies: the sealer reads the caller's payload and writes the ciphertext elsewhere (the
// caller's buffer is never written; in auth mode the payload is the body, sent as is); the
// opener decrypts in place in the buffer the body was received into (a posted receive buffer).
// A record that fails leaves nothing behind: its body is zeroed, and the opener refuses every
// later record (the link must end with the protocol error it returned, which names the peer).
//
// One thread at a time per object (one sealer per sending direction, one opener per receiving
// one); they share nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "security/primitives.h"
#include "security/suite.h"
#include "weft/status.h"

namespace weft::security {

inline constexpr size_t kRecordHeaderBytes = 4;
inline constexpr size_t kRecordOverhead = kRecordHeaderBytes + kTagBytes;

struct RecordLimits {
  // The largest body either end seals or accepts; a larger announced length is a protocol
  // error before any of the body is read. At most 2^31 - 1.
  size_t max_record = size_t{16} << 20;
  // Records per key: both ends REKEY before the record whose counter is a nonzero multiple.
  // 2^12 records of at most 16 MiB keep one AES-GCM key under 2^32 blocks. Both ends must use
  // the same value (it is fixed by the protocol; tests lower it).
  uint64_t rekey_interval = uint64_t{1} << 12;
  // The hard stop: the record with this counter is refused (sealing and opening), long before
  // the 64-bit counter could wrap or reach Noise's reserved 2^64-1.
  uint64_t max_records = uint64_t{1} << 62;
};

inline constexpr size_t sealed_size(size_t payload) { return payload + kRecordOverhead; }

class RecordSealer {
 public:
  // `peer` names the other end in errors ("rank 3").
  static Result<RecordSealer> create(CipherSuite suite, SecurityMode mode, const Key& key,
                                     const RecordLimits& limits, std::string peer);

  SecurityMode mode() const { return mode_; }
  uint64_t records_sealed() const { return n_; }

  // Seals `payload` as the next record. encrypt: `body` (payload.size() bytes, not overlapping
  // the payload) receives the ciphertext. auth: `body` must be empty, the payload is sent as is.
  Status seal(Bytes payload, std::span<uint8_t, kRecordHeaderBytes> header,
              std::span<uint8_t> body, std::span<uint8_t, kTagBytes> tag);
  // The contiguous form: out (sealed_size(payload.size()) bytes) = header || body || tag.
  Status seal(Bytes payload, std::span<uint8_t> out);

 private:
  RecordSealer(SecurityMode mode, Aead aead, const RecordLimits& limits, std::string peer)
      : mode_(mode), aead_(std::move(aead)), limits_(limits), peer_(std::move(peer)) {}

  SecurityMode mode_;
  Aead aead_;
  RecordLimits limits_;
  std::string peer_;
  uint64_t n_ = 0;
  bool failed_ = false;
};

class RecordOpener {
 public:
  static Result<RecordOpener> create(CipherSuite suite, SecurityMode mode, const Key& key,
                                     const RecordLimits& limits, std::string peer);

  SecurityMode mode() const { return mode_; }
  uint64_t records_opened() const { return n_; }

  // The body length the header announces (the caller then receives that many bytes and the
  // tag). A length above max_record is a protocol error and closes the opener, like any bad
  // record. Does not advance the counter.
  Result<size_t> body_size(std::span<const uint8_t, kRecordHeaderBytes> header);
  // Opens the next record: `body` holds the received body (exactly the announced length) and
  // receives the payload in place. On failure `body` is zeroed and the opener is closed.
  Status open(std::span<const uint8_t, kRecordHeaderBytes> header, std::span<uint8_t> body,
              std::span<const uint8_t, kTagBytes> tag);
  // The contiguous form: `record` is exactly one record; returns its payload (inside record).
  Result<std::span<uint8_t>> open(std::span<uint8_t> record);

 private:
  RecordOpener(SecurityMode mode, Aead aead, const RecordLimits& limits, std::string peer)
      : mode_(mode), aead_(std::move(aead)), limits_(limits), peer_(std::move(peer)) {}
  Status fail(std::span<uint8_t> body, Status status);

  SecurityMode mode_;
  Aead aead_;
  RecordLimits limits_;
  std::string peer_;
  uint64_t n_ = 0;
  bool failed_ = false;
};

}  // namespace weft::security
