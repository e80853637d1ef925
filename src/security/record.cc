#include "security/record.h"

#include <cstring>
#include <utility>

namespace weft::security {

namespace {

constexpr size_t kMaxRecordLimit = (size_t{1} << 31) - 1;

void put_u32le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_u32le(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

Status check_setup(SecurityMode mode, const RecordLimits& limits) {
  if (mode == SecurityMode::off) {
    return Status(ErrorCode::invalid_argument, "record layer: security mode off has no records");
  }
  if (limits.max_record == 0 || limits.max_record > kMaxRecordLimit ||
      limits.rekey_interval == 0 || limits.max_records == 0 ||
      limits.max_records >= kMaxNonce) {
    return Status(ErrorCode::invalid_argument, "record layer: limits out of range");
  }
  return Status::success();
}

// Before the record with counter n: the hard stop, then the rekey both ends do at the same n.
Status advance_key(Aead& aead, uint64_t n, const RecordLimits& limits, const std::string& peer,
                   const char* direction) {
  if (n >= limits.max_records) {
    return Status(ErrorCode::protocol, "record layer: " + std::to_string(n) + " records " +
                                           direction + " " + peer +
                                           ": the nonce counter is spent; the link must be "
                                           "re-established");
  }
  if (n != 0 && n % limits.rekey_interval == 0) return aead.rekey();
  return Status::success();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RecordSealer

Result<RecordSealer> RecordSealer::create(CipherSuite suite, SecurityMode mode, const Key& key,
                                          const RecordLimits& limits, std::string peer) {
  WEFT_RETURN_IF_ERROR(check_setup(mode, limits));
  auto aead = Aead::create(suite, key.span());
  if (!aead.ok()) return aead.status();
  return RecordSealer(mode, std::move(aead).value(), limits, std::move(peer));
}

Status RecordSealer::seal(Bytes payload, std::span<uint8_t, kRecordHeaderBytes> header,
                          std::span<uint8_t> body, std::span<uint8_t, kTagBytes> tag) {
  if (failed_) return Status(ErrorCode::protocol, "record layer: the link to " + peer_ + " failed");
  if (payload.size() > limits_.max_record) {
    return Status(ErrorCode::invalid_argument,
                  "record layer: a payload of " + std::to_string(payload.size()) +
                      " bytes is larger than a record (" + std::to_string(limits_.max_record) +
                      ")");
  }
  const size_t want_body = mode_ == SecurityMode::encrypt ? payload.size() : 0;
  if (body.size() != want_body) {
    return Status(ErrorCode::invalid_argument, "record layer: body buffer of the wrong size");
  }
  if (!body.empty() && body.data() < payload.data() + payload.size() &&
      payload.data() < body.data() + body.size()) {
    return Status(ErrorCode::invalid_argument,
                  "record layer: the ciphertext would overwrite the caller's payload");
  }
  Status st = advance_key(aead_, n_, limits_, peer_, "sent to");
  put_u32le(header.data(), static_cast<uint32_t>(payload.size()));
  if (st.ok()) {
    st = mode_ == SecurityMode::encrypt
             ? aead_.encrypt(n_, header, {}, payload, body.data(), tag)
             : aead_.encrypt(n_, header, payload, {}, nullptr, tag);
  }
  if (!st.ok()) {
    failed_ = true;
    return st;
  }
  ++n_;
  return Status::success();
}

Status RecordSealer::seal(Bytes payload, std::span<uint8_t> out) {
  if (out.size() != sealed_size(payload.size())) {
    return Status(ErrorCode::invalid_argument, "record layer: output buffer of the wrong size");
  }
  auto header = out.first<kRecordHeaderBytes>();
  auto body = out.subspan(kRecordHeaderBytes, payload.size());
  auto tag = out.last<kTagBytes>();
  if (mode_ == SecurityMode::encrypt) return seal(payload, header, body, tag);
  WEFT_RETURN_IF_ERROR(seal(payload, header, {}, tag));
  if (!payload.empty()) std::memmove(body.data(), payload.data(), payload.size());
  return Status::success();
}

// ---------------------------------------------------------------------------------------------
// RecordOpener

Result<RecordOpener> RecordOpener::create(CipherSuite suite, SecurityMode mode, const Key& key,
                                          const RecordLimits& limits, std::string peer) {
  WEFT_RETURN_IF_ERROR(check_setup(mode, limits));
  auto aead = Aead::create(suite, key.span());
  if (!aead.ok()) return aead.status();
  return RecordOpener(mode, std::move(aead).value(), limits, std::move(peer));
}

Result<size_t> RecordOpener::body_size(std::span<const uint8_t, kRecordHeaderBytes> header) {
  if (failed_) return Status(ErrorCode::protocol, "record layer: the link from " + peer_ + " failed");
  const size_t length = get_u32le(header.data());
  if (length > limits_.max_record) {
    failed_ = true;
    return Status(ErrorCode::protocol,
                  "record layer: record " + std::to_string(n_) + " from " + peer_ +
                      " announces " + std::to_string(length) + " bytes, more than a record (" +
                      std::to_string(limits_.max_record) + ")");
  }
  return length;
}

Status RecordOpener::fail(std::span<uint8_t> body, Status status) {
  // Nothing of a failed record may be used: not the plaintext decrypted in place, not even
  // the ciphertext (auth mode would leave the unauthenticated payload in the buffer).
  if (!body.empty()) wipe(body.data(), body.size());
  failed_ = true;
  return status;
}

Status RecordOpener::open(std::span<const uint8_t, kRecordHeaderBytes> header,
                          std::span<uint8_t> body, std::span<const uint8_t, kTagBytes> tag) {
  auto length = body_size(header);
  if (!length.ok()) return fail(body, length.status());
  if (*length != body.size()) {
    return fail(body, Status(ErrorCode::protocol,
                             "record layer: record " + std::to_string(n_) + " from " + peer_ +
                                 " is truncated or padded (" + std::to_string(body.size()) +
                                 " body bytes, the header says " + std::to_string(*length) + ")"));
  }
  Status st = advance_key(aead_, n_, limits_, peer_, "received from");
  if (!st.ok()) return fail(body, std::move(st));
  const bool ok = mode_ == SecurityMode::encrypt
                      ? aead_.decrypt(n_, header, {}, body, body.data(), tag)
                      : aead_.decrypt(n_, header, body, {}, nullptr, tag);
  if (!ok) {
    return fail(body, Status(ErrorCode::protocol,
                             "record layer: record " + std::to_string(n_) + " from " + peer_ +
                                 " failed authentication (changed, replayed, reordered or cut "
                                 "short in transit, or sent with another key)"));
  }
  ++n_;
  return Status::success();
}

Result<std::span<uint8_t>> RecordOpener::open(std::span<uint8_t> record) {
  if (record.size() < kRecordOverhead) {
    return fail(record, Status(ErrorCode::protocol,
                               "record layer: record " + std::to_string(n_) + " from " + peer_ +
                                   " is truncated (" + std::to_string(record.size()) +
                                   " bytes, less than a header and a tag)"));
  }
  auto body = record.subspan(kRecordHeaderBytes, record.size() - kRecordOverhead);
  WEFT_RETURN_IF_ERROR(open(record.first<kRecordHeaderBytes>(), body, record.last<kTagBytes>()));
  return body;
}

}  // namespace weft::security
