// What a secured link uses: the security mode (off, auth, encrypt) and the Noise cipher suite
// (ChaChaPoly or AESGCM, both with X25519 and BLAKE2s), how a link chooses its suite, and the
// names both sides must agree on. docs/security.md has the protocol; this header only names it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace weft::security {

// off: no handshake, clear frames (a trusted single-tenant network, or no key given).
// auth: Noise handshake, then every record authenticated but sent in clear (integrity and
//       origin, no confidentiality; for trusted networks where the cipher's cost matters).
// encrypt: Noise handshake, then every record encrypted and authenticated (the default when a
//          job key is given).
enum class SecurityMode : uint8_t { off = 0, auth = 1, encrypt = 2 };

enum class CipherSuite : uint8_t {
  chachapoly = 1,  // Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s (WireGuard's)
  aesgcm = 2,      // Noise_IKpsk2_25519_AESGCM_BLAKE2s (when both ends have AES instructions)
};

const char* to_string(SecurityMode mode);
const char* to_string(CipherSuite suite);
// "off", "auth", "encrypt"; nullopt for anything else.
std::optional<SecurityMode> parse_security_mode(std::string_view name);
// The full Noise protocol name of the suite, e.g. "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s".
std::string_view noise_protocol_name(CipherSuite suite);

// Whether this CPU has AES and carry-less multiply instructions (x86 AES-NI + PCLMULQDQ, Arm
// AES + PMULL), which make AES-GCM faster than ChaCha20-Poly1305. Read once, cached.
bool cpu_has_aes_acceleration();

// The suite of one link: AESGCM only when both ends have AES instructions (each rank publishes
// its answer next to its static key), else ChaChaPoly, which is fast everywhere. The initiator
// chooses and names the choice in the handshake preamble, which is part of the prologue, so a
// changed choice fails the handshake (noise.h).
CipherSuite choose_suite(bool local_has_aes, bool peer_has_aes);

}  // namespace weft::security
