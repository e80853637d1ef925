// The cryptographic primitives of the Noise suites, on OpenSSL 3: BLAKE2s-256 (HASH), Noise's
// HMAC-based HKDF over it, X25519 (DH) and the two AEADs (ChaCha20-Poly1305, AES-256-GCM) with
// Noise's nonce encodings. Other layers use noise.h, record.h and job_key.h; this header comes
// with them (they name its types). Each object belongs to one thread at a time.
#pragma once

#include <openssl/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "security/secret.h"
#include "security/suite.h"
#include "weft/status.h"

namespace weft::security {

inline constexpr size_t kKeyBytes = 32;   // DHLEN, HASHLEN, cipher keys, the pre-shared key
inline constexpr size_t kTagBytes = 16;   // AEAD tag
inline constexpr uint64_t kMaxNonce = ~uint64_t{0};  // 2^64-1: reserved by Noise for REKEY

using Key = SecretBytes<kKeyBytes>;
using PublicKey = std::array<uint8_t, kKeyBytes>;
using Digest = std::array<uint8_t, kKeyBytes>;
using Bytes = std::span<const uint8_t>;

// HASH(a || b) with BLAKE2s-256.
Status blake2s(Bytes a, Bytes b, Digest& out);

// Noise's HKDF(chaining_key, ikm, n) for n = 2 (out3 null) or 3: HMAC-BLAKE2s in the extract and
// expand steps (the same as RFC 5869 HKDF with the chaining key as salt and empty info).
Status noise_hkdf(std::span<const uint8_t, kKeyBytes> chaining_key, Bytes ikm, Key& out1,
                  Key& out2, Key* out3);

struct X25519Keypair {
  Key private_key;
  PublicKey public_key{};
  // OpenSSL's key object, made once: making it derives the public key (a scalar
  // multiplication), which each DH would otherwise repeat. Shared by copies.
  std::shared_ptr<EVP_PKEY> pkey;

  // The public key is derived (the scalar is clamped inside X25519, as RFC 7748 says).
  static Result<X25519Keypair> from_private(std::span<const uint8_t, kKeyBytes> private_key);
  static Result<X25519Keypair> generate();  // RAND_bytes
};

// DH(mine.private, peer_public). Fails (instead of returning zeros) when the peer's key is a
// point of small order, which an honest peer never sends.
Status x25519(const X25519Keypair& mine, std::span<const uint8_t, kKeyBytes> peer_public,
              Key& shared);

// One AEAD key with its reusable OpenSSL context: setting the nonce per message does not
// allocate or redo the key schedule. Nonces are Noise's: 32 zero bits then the 64-bit counter,
// little-endian for ChaChaPoly and big-endian for AESGCM.
class Aead {
 public:
  static Result<Aead> create(CipherSuite suite, std::span<const uint8_t, kKeyBytes> key);
  Aead(Aead&& o) noexcept;
  Aead& operator=(Aead&& o) noexcept;
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;
  ~Aead();

  CipherSuite suite() const { return suite_; }

  // ENCRYPT(k, n, ad1 || ad2, plaintext): the ciphertext (plaintext.size() bytes) goes to `out`,
  // which may be plaintext.data() itself or must not overlap it; then the tag.
  Status encrypt(uint64_t n, Bytes ad1, Bytes ad2, Bytes plaintext, uint8_t* out,
                 std::span<uint8_t, kTagBytes> tag);
  // DECRYPT: false when the tag does not verify (or OpenSSL fails): `out` then holds bytes that
  // must not be used. `out` may be ciphertext.data() itself (in-place) or must not overlap it.
  bool decrypt(uint64_t n, Bytes ad1, Bytes ad2, Bytes ciphertext, uint8_t* out,
               std::span<const uint8_t, kTagBytes> tag);
  // Noise REKEY: k = the first 32 bytes of ENCRYPT(k, 2^64-1, empty, 32 zero bytes).
  Status rekey();
  // A new key for the same context (Noise's InitializeKey during the handshake).
  Status set_key(std::span<const uint8_t, kKeyBytes> key);

 private:
  Aead(CipherSuite suite, EVP_CIPHER_CTX* ctx) : suite_(suite), ctx_(ctx) {}
  bool start(uint64_t n, int encrypting);

  CipherSuite suite_;
  EVP_CIPHER_CTX* ctx_ = nullptr;
  Key key_;
  int direction_ = -1;  // 1 encrypting, 0 decrypting, -1 not started with the current key
};

}  // namespace weft::security
