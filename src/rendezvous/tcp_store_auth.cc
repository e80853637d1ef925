#include "rendezvous/tcp_store_auth.h"

#include <openssl/rand.h>

#include <string_view>

namespace weft::tcp_store {
namespace {

constexpr std::string_view kStoreLabel = "weft store v2";

}  // namespace

Result<Nonce> random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    return Status(ErrorCode::internal, "weft store: RAND_bytes failed");
  }
  return n;
}

Result<Session> make_session(const security::JobKey& key, bool server, const Nonce& client,
                             const Nonce& server_nonce, std::string peer) {
  security::Key store_key, unused;
  const auto* label = reinterpret_cast<const uint8_t*>(kStoreLabel.data());
  WEFT_RETURN_IF_ERROR(security::noise_hkdf(key.bytes(), {label, kStoreLabel.size()}, store_key,
                                            unused, nullptr));
  std::array<uint8_t, 2 * kNonceBytes> both{};
  std::copy(client.begin(), client.end(), both.begin());
  std::copy(server_nonce.begin(), server_nonce.end(), both.begin() + kNonceBytes);
  security::Key c2s, s2c;
  WEFT_RETURN_IF_ERROR(security::noise_hkdf(store_key.span(), both, c2s, s2c, nullptr));
  security::RecordLimits limits;
  limits.max_record = kMaxRecordBody;
  const auto suite = security::CipherSuite::chachapoly;
  const auto mode = security::SecurityMode::auth;
  auto sealer = security::RecordSealer::create(suite, mode, server ? s2c : c2s, limits, peer);
  if (!sealer.ok()) return sealer.status();
  auto opener = security::RecordOpener::create(suite, mode, server ? c2s : s2c, limits, peer);
  if (!opener.ok()) return opener.status();
  return Session{std::move(sealer).value(), std::move(opener).value()};
}

}  // namespace weft::tcp_store
