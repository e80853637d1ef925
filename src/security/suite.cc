#include "security/suite.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace weft::security {

const char* to_string(SecurityMode mode) {
  switch (mode) {
    case SecurityMode::off: return "off";
    case SecurityMode::auth: return "auth";
    case SecurityMode::encrypt: return "encrypt";
  }
  return "unknown";
}

const char* to_string(CipherSuite suite) {
  switch (suite) {
    case CipherSuite::chachapoly: return "ChaChaPoly";
    case CipherSuite::aesgcm: return "AESGCM";
  }
  return "unknown";
}

std::optional<SecurityMode> parse_security_mode(std::string_view name) {
  if (name == "off") return SecurityMode::off;
  if (name == "auth") return SecurityMode::auth;
  if (name == "encrypt") return SecurityMode::encrypt;
  return std::nullopt;
}

std::string_view noise_protocol_name(CipherSuite suite) {
  return suite == CipherSuite::aesgcm ? "Noise_IKpsk2_25519_AESGCM_BLAKE2s"
                                      : "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
}

namespace {

bool detect_aes_acceleration() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool aes = (ecx & bit_AES) != 0;
  const bool pclmul = (ecx & bit_PCLMUL) != 0;
  return aes && pclmul;
#elif defined(__aarch64__)
  const unsigned long caps = getauxval(AT_HWCAP);
  return (caps & HWCAP_AES) != 0 && (caps & HWCAP_PMULL) != 0;
#else
  return false;
#endif
}

}  // namespace

bool cpu_has_aes_acceleration() {
  static const bool has = detect_aes_acceleration();
  return has;
}

CipherSuite choose_suite(bool local_has_aes, bool peer_has_aes) {
  return local_has_aes && peer_has_aes ? CipherSuite::aesgcm : CipherSuite::chachapoly;
}

}  // namespace weft::security
