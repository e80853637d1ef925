#include "security/primitives.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <climits>
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace weft::security {

void wipe(void* p, size_t n) { OPENSSL_cleanse(p, n); }

namespace {

Status openssl_error(const char* what) {
  const unsigned long e = ERR_get_error();
  char text[256] = "no OpenSSL error queued";
  if (e != 0) ERR_error_string_n(e, text, sizeof(text));
  ERR_clear_error();
  return Status(ErrorCode::internal, std::string(what) + ": " + text);
}

// Algorithms are fetched once: an implicit fetch per call would cost a lookup every message.
const EVP_MD* blake2s_md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "BLAKE2S-256", nullptr);
  return md;
}

const EVP_CIPHER* cipher_of(CipherSuite suite) {
  static EVP_CIPHER* chacha = EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
  static EVP_CIPHER* aes = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return suite == CipherSuite::aesgcm ? aes : chacha;
}

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxDeleter {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxDeleter>;

// HMAC-BLAKE2s(key, a || b) for a 32-byte key (shorter than the 64-byte block, so no key
// hashing): H((key ^ opad) || H((key ^ ipad) || a || b)). Written out on the prefetched digest
// because OpenSSL's HMAC() looks the digest and the MAC up by name on every call.
bool hmac(std::span<const uint8_t, kKeyBytes> key, Bytes a, Bytes b, uint8_t* out) {
  constexpr size_t kBlock = 64;
  uint8_t pad[kBlock];
  uint8_t inner[kKeyBytes];
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned len = 0;
  for (size_t i = 0; i < kBlock; ++i) pad[i] = static_cast<uint8_t>((i < key.size() ? key[i] : 0) ^ 0x36);
  bool ok = ctx != nullptr && EVP_DigestInit_ex2(ctx, blake2s_md(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, pad, kBlock) == 1 &&
            EVP_DigestUpdate(ctx, a.data(), a.size()) == 1 &&
            EVP_DigestUpdate(ctx, b.data(), b.size()) == 1 &&
            EVP_DigestFinal_ex(ctx, inner, &len) == 1 && len == kKeyBytes;
  for (size_t i = 0; i < kBlock; ++i) pad[i] ^= 0x36 ^ 0x5c;
  ok = ok && EVP_DigestInit_ex2(ctx, blake2s_md(), nullptr) == 1 &&
       EVP_DigestUpdate(ctx, pad, kBlock) == 1 && EVP_DigestUpdate(ctx, inner, kKeyBytes) == 1 &&
       EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == kKeyBytes;
  EVP_MD_CTX_free(ctx);
  wipe(pad, sizeof(pad));
  wipe(inner, sizeof(inner));
  return ok;
}

}  // namespace

Status blake2s(Bytes a, Bytes b, Digest& out) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned len = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex2(ctx, blake2s_md(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, a.data(), a.size()) == 1 &&
                  EVP_DigestUpdate(ctx, b.data(), b.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, out.data(), &len) == 1 && len == out.size();
  EVP_MD_CTX_free(ctx);
  return ok ? Status::success() : openssl_error("BLAKE2s");
}

Status noise_hkdf(std::span<const uint8_t, kKeyBytes> chaining_key, Bytes ikm, Key& out1,
                  Key& out2, Key* out3) {
  Key temp_key;
  if (!hmac(chaining_key, ikm, {}, temp_key.data())) return openssl_error("HKDF extract");
  const uint8_t one = 1, two = 2, three = 3;
  if (!hmac(temp_key.span(), Bytes(&one, 1), {}, out1.data()) ||
      !hmac(temp_key.span(), out1.span(), Bytes(&two, 1), out2.data()) ||
      (out3 != nullptr && !hmac(temp_key.span(), out2.span(), Bytes(&three, 1), out3->data()))) {
    return openssl_error("HKDF expand");
  }
  return Status::success();
}

Result<X25519Keypair> X25519Keypair::from_private(std::span<const uint8_t, kKeyBytes> priv) {
  X25519Keypair kp;
  kp.pkey.reset(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, priv.data(), priv.size()),
                EVP_PKEY_free);  // EVP_PKEY_free cleanses the private key
  size_t len = kp.public_key.size();
  if (!kp.pkey || EVP_PKEY_get_raw_public_key(kp.pkey.get(), kp.public_key.data(), &len) != 1 ||
      len != kp.public_key.size()) {
    return openssl_error("X25519 key");
  }
  kp.private_key.assign(priv);
  return kp;
}

Result<X25519Keypair> X25519Keypair::generate() {
  Key priv;
  if (RAND_bytes(priv.data(), static_cast<int>(priv.size())) != 1) {
    return openssl_error("RAND_bytes");
  }
  return from_private(priv.span());
}

Status x25519(const X25519Keypair& mine, std::span<const uint8_t, kKeyBytes> peer_public,
              Key& shared) {
  PkeyPtr theirs(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(), peer_public.size()));
  if (!mine.pkey || !theirs) return openssl_error("X25519 key");
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, mine.pkey.get(), nullptr));
  size_t len = shared.size();
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer_ex(ctx.get(), theirs.get(), 0) != 1 ||
      EVP_PKEY_derive(ctx.get(), shared.data(), &len) != 1 || len != shared.size()) {
    // OpenSSL refuses an all-zero result: the peer sent a point of small order.
    ERR_clear_error();
    return Status(ErrorCode::protocol, "X25519 failed: the peer's public key is not usable");
  }
  return Status::success();
}

// ---------------------------------------------------------------------------------------------
// Aead

Result<Aead> Aead::create(CipherSuite suite, std::span<const uint8_t, kKeyBytes> key) {
  if (cipher_of(suite) == nullptr) return openssl_error("fetching the cipher");
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) return openssl_error("EVP_CIPHER_CTX_new");
  Aead aead(suite, ctx);
  WEFT_RETURN_IF_ERROR(aead.set_key(key));
  return aead;
}

Aead::Aead(Aead&& o) noexcept
    : suite_(o.suite_), ctx_(std::exchange(o.ctx_, nullptr)), key_(o.key_),
      direction_(o.direction_) {
  o.key_.clear();
}

Aead& Aead::operator=(Aead&& o) noexcept {
  if (this != &o) {
    EVP_CIPHER_CTX_free(ctx_);
    suite_ = o.suite_;
    ctx_ = std::exchange(o.ctx_, nullptr);
    key_ = o.key_;
    o.key_.clear();
    direction_ = o.direction_;
  }
  return *this;
}

Aead::~Aead() { EVP_CIPHER_CTX_free(ctx_); }  // frees (and cleanses) the key schedule

Status Aead::set_key(std::span<const uint8_t, kKeyBytes> key) {
  key_.assign(key);
  direction_ = -1;
  return Status::success();
}

// Sets the nonce; the key schedule is redone only when the key or the direction changed (the
// handshake uses one key both ways, the record layer one direction per key).
bool Aead::start(uint64_t n, int encrypting) {
  uint8_t nonce[12] = {};
  for (int i = 0; i < 8; ++i) {
    const auto byte = static_cast<uint8_t>(n >> (8 * i));
    if (suite_ == CipherSuite::aesgcm) {
      nonce[11 - i] = byte;  // big-endian
    } else {
      nonce[4 + i] = byte;  // little-endian
    }
  }
  if (direction_ != encrypting) {
    if (EVP_CipherInit_ex2(ctx_, cipher_of(suite_), key_.data(), nonce, encrypting, nullptr) != 1) {
      direction_ = -1;
      return false;
    }
    direction_ = encrypting;
    return true;
  }
  return EVP_CipherInit_ex2(ctx_, nullptr, nullptr, nonce, encrypting, nullptr) == 1;
}

namespace {

// EVP_*Update takes an int length: feed big buffers in pieces.
constexpr size_t kUpdateStep = size_t{1} << 30;

bool update_aad(EVP_CIPHER_CTX* ctx, Bytes ad) {
  for (size_t off = 0; off < ad.size(); off += kUpdateStep) {
    const int n = static_cast<int>(std::min(kUpdateStep, ad.size() - off));
    int out_len = 0;
    if (EVP_CipherUpdate(ctx, nullptr, &out_len, ad.data() + off, n) != 1) return false;
  }
  return true;
}

bool update_data(EVP_CIPHER_CTX* ctx, Bytes in, uint8_t* out) {
  for (size_t off = 0; off < in.size(); off += kUpdateStep) {
    const int n = static_cast<int>(std::min(kUpdateStep, in.size() - off));
    int out_len = 0;
    if (EVP_CipherUpdate(ctx, out + off, &out_len, in.data() + off, n) != 1 || out_len != n) {
      return false;
    }
  }
  return true;
}

}  // namespace

Status Aead::encrypt(uint64_t n, Bytes ad1, Bytes ad2, Bytes plaintext, uint8_t* out,
                     std::span<uint8_t, kTagBytes> tag) {
  int final_len = 0;
  uint8_t none[1];  // Final writes nothing for these ciphers; it gets a valid pointer anyway
  if (!start(n, 1) || !update_aad(ctx_, ad1) || !update_aad(ctx_, ad2) ||
      !update_data(ctx_, plaintext, out) ||
      EVP_CipherFinal_ex(ctx_, none, &final_len) != 1 || final_len != 0 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kTagBytes), tag.data()) !=
          1) {
    direction_ = -1;
    return openssl_error("AEAD encrypt");
  }
  return Status::success();
}

bool Aead::decrypt(uint64_t n, Bytes ad1, Bytes ad2, Bytes ciphertext, uint8_t* out,
                   std::span<const uint8_t, kTagBytes> tag) {
  int final_len = 0;
  uint8_t none[1];
  const bool ok =
      start(n, 0) && update_aad(ctx_, ad1) && update_aad(ctx_, ad2) &&
      update_data(ctx_, ciphertext, out) &&
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kTagBytes),
                          const_cast<uint8_t*>(tag.data())) == 1 &&
      EVP_CipherFinal_ex(ctx_, none, &final_len) == 1 && final_len == 0;
  if (!ok) {
    ERR_clear_error();
    direction_ = -1;  // start afresh: a failed Final may leave the context half-used
  }
  return ok;
}

Status Aead::rekey() {
  uint8_t zeros[kKeyBytes] = {};
  Key next;
  uint8_t tag[kTagBytes];
  WEFT_RETURN_IF_ERROR(encrypt(kMaxNonce, {}, {}, Bytes(zeros, sizeof(zeros)), next.data(), tag));
  return set_key(next.span());
}

}  // namespace weft::security
