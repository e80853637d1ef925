#include "security/noise.h"

#include <cstring>
#include <string>
#include <utility>

namespace weft::security {

namespace {

constexpr uint8_t kPreambleMagic[4] = {'W', 'N', 'Z', 1};

Status protocol_error(const std::string& what) {
  return Status(ErrorCode::protocol, "Noise handshake: " + what);
}

}  // namespace

std::array<uint8_t, kPreambleBytes> encode_preamble(const Preamble& preamble) {
  return {kPreambleMagic[0], kPreambleMagic[1],
          kPreambleMagic[2], kPreambleMagic[3],
          static_cast<uint8_t>(preamble.suite), static_cast<uint8_t>(preamble.mode),
          0, 0};
}

Result<Preamble> decode_preamble(std::span<const uint8_t, kPreambleBytes> bytes) {
  if (std::memcmp(bytes.data(), kPreambleMagic, sizeof(kPreambleMagic)) != 0) {
    return protocol_error("the peer's preamble is not a weft Noise preamble (version 1)");
  }
  Preamble p;
  if (bytes[4] != static_cast<uint8_t>(CipherSuite::chachapoly) &&
      bytes[4] != static_cast<uint8_t>(CipherSuite::aesgcm)) {
    return protocol_error("unknown cipher suite " + std::to_string(bytes[4]) + " in the preamble");
  }
  p.suite = static_cast<CipherSuite>(bytes[4]);
  if (bytes[5] != static_cast<uint8_t>(SecurityMode::auth) &&
      bytes[5] != static_cast<uint8_t>(SecurityMode::encrypt)) {
    return protocol_error("unknown security mode " + std::to_string(bytes[5]) + " in the preamble");
  }
  p.mode = static_cast<SecurityMode>(bytes[5]);
  if (bytes[6] != 0 || bytes[7] != 0) return protocol_error("reserved preamble bytes are not zero");
  return p;
}

Result<std::vector<uint8_t>> build_prologue(const Preamble& preamble,
                                            std::span<const uint8_t> job_binding) {
  if (job_binding.size() > kMaxJobBinding) {
    return Status(ErrorCode::invalid_argument,
                  "Noise prologue: the job binding is longer than " +
                      std::to_string(kMaxJobBinding) + " bytes");
  }
  const auto head = encode_preamble(preamble);
  std::vector<uint8_t> prologue(head.begin(), head.end());
  prologue.push_back(static_cast<uint8_t>(job_binding.size()));
  prologue.push_back(static_cast<uint8_t>(job_binding.size() >> 8));
  prologue.insert(prologue.end(), job_binding.begin(), job_binding.end());
  return prologue;
}

// ---------------------------------------------------------------------------------------------

NoiseHandshake::NoiseHandshake(const HandshakeConfig& config)
    : role_(config.role), suite_(config.suite), fixed_ephemeral_(config.fixed_ephemeral) {}

Result<NoiseHandshake> NoiseHandshake::create(const HandshakeConfig& config) {
  if (config.local_static == nullptr) {
    return Status(ErrorCode::invalid_argument, "Noise handshake: no local static key");
  }
  if (config.psk.size() != kKeyBytes) {
    return Status(ErrorCode::invalid_argument, "Noise handshake: the pre-shared key is not 32 bytes");
  }
  NoiseHandshake hs(config);
  hs.psk_.assign(config.psk.first<kKeyBytes>());
  hs.s_ = *config.local_static;
  // InitializeSymmetric: the protocol name is longer than HASHLEN, so h = HASH(name); ck = h.
  const std::string_view name = noise_protocol_name(config.suite);
  WEFT_RETURN_IF_ERROR(
      blake2s(Bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size()), {}, hs.h_));
  hs.ck_.assign(std::span<const uint8_t, kKeyBytes>(hs.h_));
  WEFT_RETURN_IF_ERROR(hs.mix_hash(config.prologue));
  // The pre-message "<- s": both sides hash the responder's static public key.
  if (config.role == Role::initiator) {
    hs.rs_ = config.remote_static;
    WEFT_RETURN_IF_ERROR(hs.mix_hash(hs.rs_));
  } else {
    WEFT_RETURN_IF_ERROR(hs.mix_hash(hs.s_.public_key));
  }
  return hs;
}

template <typename T>
Result<T> NoiseHandshake::fail(Status status) {
  step_ = Step::failed;
  ck_.clear();
  psk_.clear();
  e_ = X25519Keypair{};
  k_.reset();
  return status;
}

Status NoiseHandshake::check_step(Step expected, Role role, const char* what) const {
  if (step_ == Step::failed) return Status(ErrorCode::invalid_argument, "Noise handshake failed before");
  if (step_ != expected || role_ != role) {
    return Status(ErrorCode::internal, std::string("Noise handshake: ") + what +
                                           " called out of order or by the wrong role");
  }
  return Status::success();
}

Status NoiseHandshake::mix_hash(Bytes data) { return blake2s(h_, data, h_); }

Status NoiseHandshake::initialize_key(const Key& key) {
  n_ = 0;
  if (k_) return k_->set_key(key.span());
  auto aead = Aead::create(suite_, key.span());
  if (!aead.ok()) return aead.status();
  k_.emplace(std::move(aead).value());
  return Status::success();
}

Status NoiseHandshake::mix_key(Bytes ikm) {
  Key temp_k;
  WEFT_RETURN_IF_ERROR(noise_hkdf(ck_.span(), ikm, ck_, temp_k, nullptr));
  return initialize_key(temp_k);
}

Status NoiseHandshake::mix_key_and_hash(Bytes ikm) {
  Key temp_h, temp_k;
  WEFT_RETURN_IF_ERROR(noise_hkdf(ck_.span(), ikm, ck_, temp_h, &temp_k));
  WEFT_RETURN_IF_ERROR(mix_hash(temp_h.span()));
  return initialize_key(temp_k);
}

Status NoiseHandshake::encrypt_and_hash(Bytes plaintext, std::vector<uint8_t>& out) {
  // In IKpsk2 a key is always set before the first EncryptAndHash (after "es" / "ee").
  if (!k_) return Status(ErrorCode::internal, "Noise handshake: EncryptAndHash without a key");
  const size_t at = out.size();
  out.resize(at + plaintext.size() + kTagBytes);
  uint8_t* ct = out.data() + at;
  WEFT_RETURN_IF_ERROR(k_->encrypt(n_, h_, {}, plaintext, ct,
                                   std::span<uint8_t, kTagBytes>(ct + plaintext.size(), kTagBytes)));
  ++n_;
  return mix_hash(Bytes(ct, plaintext.size() + kTagBytes));
}

Status NoiseHandshake::decrypt_and_hash(Bytes ciphertext, std::vector<uint8_t>& out) {
  if (!k_) return Status(ErrorCode::internal, "Noise handshake: DecryptAndHash without a key");
  if (ciphertext.size() < kTagBytes) return protocol_error("message too short");
  const size_t n = ciphertext.size() - kTagBytes;
  out.resize(n);
  if (!k_->decrypt(n_, h_, {}, ciphertext.first(n), out.data(),
                   std::span<const uint8_t, kTagBytes>(ciphertext.data() + n, kTagBytes))) {
    wipe(out.data(), out.size());
    out.clear();
    return protocol_error(
        "a message failed authentication (wrong keys, wrong job key, another job or a changed "
        "message)");
  }
  ++n_;
  return mix_hash(ciphertext);
}

Status NoiseHandshake::make_ephemeral() {
  auto e = fixed_ephemeral_ ? X25519Keypair::from_private(fixed_ephemeral_->span())
                            : X25519Keypair::generate();
  if (!e.ok()) return e.status();
  e_ = std::move(e).value();
  return Status::success();
}

Status NoiseHandshake::dh_into_key(const X25519Keypair& mine, const PublicKey& public_key) {
  Key shared;
  WEFT_RETURN_IF_ERROR(x25519(mine, public_key, shared));
  return mix_key(shared.span());
}

Result<std::vector<uint8_t>> NoiseHandshake::write_message1(Bytes payload) {
  WEFT_RETURN_IF_ERROR(check_step(Step::message1, Role::initiator, "write_message1"));
  if (payload.size() > kMaxHandshakePayload) {
    return Status(ErrorCode::invalid_argument, "Noise handshake: payload too long");
  }
  std::vector<uint8_t> out;
  out.reserve(message1_size(payload.size()));
  Status st = make_ephemeral();
  // e (with psk: MixKey(e) too), es, s, ss, payload
  if (st.ok()) {
    out.insert(out.end(), e_.public_key.begin(), e_.public_key.end());
    st = mix_hash(e_.public_key);
  }
  if (st.ok()) st = mix_key(e_.public_key);
  if (st.ok()) st = dh_into_key(e_, rs_);
  if (st.ok()) st = encrypt_and_hash(s_.public_key, out);
  if (st.ok()) st = dh_into_key(s_, rs_);
  if (st.ok()) st = encrypt_and_hash(payload, out);
  if (!st.ok()) return fail<std::vector<uint8_t>>(std::move(st));
  step_ = Step::message2;
  return out;
}

Result<std::vector<uint8_t>> NoiseHandshake::read_message1(Bytes message) {
  WEFT_RETURN_IF_ERROR(check_step(Step::message1, Role::responder, "read_message1"));
  if (message.size() < message1_size(0) || message.size() > message1_size(kMaxHandshakePayload)) {
    return fail<std::vector<uint8_t>>(protocol_error(
        "message 1 has " + std::to_string(message.size()) + " bytes (expected " +
        std::to_string(message1_size(0)) + " to " +
        std::to_string(message1_size(kMaxHandshakePayload)) + ")"));
  }
  std::vector<uint8_t> rs, payload;
  std::memcpy(re_.data(), message.data(), kKeyBytes);
  Status st = mix_hash(re_);
  if (st.ok()) st = mix_key(re_);
  if (st.ok()) st = dh_into_key(s_, re_);
  if (st.ok()) st = decrypt_and_hash(message.subspan(kKeyBytes, kKeyBytes + kTagBytes), rs);
  if (st.ok()) {
    std::memcpy(rs_.data(), rs.data(), kKeyBytes);
    st = dh_into_key(s_, rs_);
  }
  if (st.ok()) st = decrypt_and_hash(message.subspan(2 * kKeyBytes + kTagBytes), payload);
  if (!st.ok()) return fail<std::vector<uint8_t>>(std::move(st));
  step_ = Step::message2;
  return payload;
}

Result<std::vector<uint8_t>> NoiseHandshake::write_message2(Bytes payload) {
  WEFT_RETURN_IF_ERROR(check_step(Step::message2, Role::responder, "write_message2"));
  if (payload.size() > kMaxHandshakePayload) {
    return Status(ErrorCode::invalid_argument, "Noise handshake: payload too long");
  }
  std::vector<uint8_t> out;
  out.reserve(message2_size(payload.size()));
  // e (MixKey(e) too), ee, se, psk, payload
  Status st = make_ephemeral();
  if (st.ok()) {
    out.insert(out.end(), e_.public_key.begin(), e_.public_key.end());
    st = mix_hash(e_.public_key);
  }
  if (st.ok()) st = mix_key(e_.public_key);
  if (st.ok()) st = dh_into_key(e_, re_);
  if (st.ok()) st = dh_into_key(e_, rs_);
  if (st.ok()) st = mix_key_and_hash(psk_.span());
  if (st.ok()) st = encrypt_and_hash(payload, out);
  if (!st.ok()) return fail<std::vector<uint8_t>>(std::move(st));
  step_ = Step::split;
  return out;
}

Result<std::vector<uint8_t>> NoiseHandshake::read_message2(Bytes message) {
  WEFT_RETURN_IF_ERROR(check_step(Step::message2, Role::initiator, "read_message2"));
  if (message.size() < message2_size(0) || message.size() > message2_size(kMaxHandshakePayload)) {
    return fail<std::vector<uint8_t>>(protocol_error(
        "message 2 has " + std::to_string(message.size()) + " bytes (expected " +
        std::to_string(message2_size(0)) + " to " +
        std::to_string(message2_size(kMaxHandshakePayload)) + ")"));
  }
  std::vector<uint8_t> payload;
  std::memcpy(re_.data(), message.data(), kKeyBytes);
  Status st = mix_hash(re_);
  if (st.ok()) st = mix_key(re_);
  if (st.ok()) st = dh_into_key(e_, re_);
  if (st.ok()) st = dh_into_key(s_, re_);
  if (st.ok()) st = mix_key_and_hash(psk_.span());
  if (st.ok()) st = decrypt_and_hash(message.subspan(kKeyBytes), payload);
  if (!st.ok()) return fail<std::vector<uint8_t>>(std::move(st));
  step_ = Step::split;
  return payload;
}

Result<TransportKeys> NoiseHandshake::split() {
  if (step_ != Step::split) {
    return Status(ErrorCode::internal, "Noise handshake: split() before the handshake finished");
  }
  TransportKeys keys;
  Key c1, c2;  // c1: initiator -> responder
  Status st = noise_hkdf(ck_.span(), {}, c1, c2, nullptr);
  if (!st.ok()) return fail<TransportKeys>(std::move(st));
  keys.suite = suite_;
  keys.send = role_ == Role::initiator ? c1 : c2;
  keys.receive = role_ == Role::initiator ? c2 : c1;
  keys.handshake_hash = h_;
  keys.remote_static = rs_;
  step_ = Step::done;
  // Nothing of the handshake is needed any more.
  ck_.clear();
  psk_.clear();
  e_ = X25519Keypair{};
  k_.reset();
  return keys;
}

}  // namespace weft::security
