#include "transport/tcp/secure_setup.h"

#include <fmt/format.h>

#include <algorithm>

namespace weft::tcp {
namespace {

constexpr std::string_view kKeyPrefix = "noise ";
constexpr char kHex[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The sealer and opener of one socket from the handshake's keys; `peer` names the other end.
Status make_crypto(security::NoiseHandshake& hs, security::SecurityMode mode, int peer,
                   LinkCrypto& crypto) {
  auto keys = hs.split();
  if (!keys.ok()) return keys.status();
  const std::string name = fmt::format("rank {}", peer);
  auto sealer = security::RecordSealer::create(keys->suite, mode, keys->send, tcp_record_limits(),
                                               name);
  if (!sealer.ok()) return sealer.status();
  auto opener = security::RecordOpener::create(keys->suite, mode, keys->receive,
                                               tcp_record_limits(), name);
  if (!opener.ok()) return opener.status();
  crypto.sealer.emplace(std::move(sealer.value()));
  crypto.opener.emplace(std::move(opener.value()));
  return Status();
}

}  // namespace

security::RecordLimits tcp_record_limits() { return security::RecordLimits{}; }

std::string encode_static_key_line(const StaticKeyRecord& record) {
  std::string out(kKeyPrefix);
  for (uint8_t b : record.key) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  out += record.has_aes ? " 1" : " 0";
  return out;
}

Result<StaticKeyRecord> parse_static_key_line(std::string_view line, int rank) {
  auto bad = [&] {
    return Status(ErrorCode::protocol,
                  fmt::format("malformed static key in the address record of rank {}", rank));
  };
  if (line.size() != kKeyPrefix.size() + 2 * security::kKeyBytes + 2 ||
      line.substr(0, kKeyPrefix.size()) != kKeyPrefix) {
    return bad();
  }
  StaticKeyRecord r;
  std::string_view hex = line.substr(kKeyPrefix.size(), 2 * security::kKeyBytes);
  for (size_t i = 0; i < security::kKeyBytes; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return bad();
    r.key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  std::string_view flag = line.substr(line.size() - 2);
  if (flag != " 0" && flag != " 1") return bad();
  r.has_aes = flag == " 1";
  return r;
}

std::array<uint8_t, 8> job_binding(uint64_t token) {
  std::array<uint8_t, 8> b{};
  for (size_t i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(token >> (8 * i));
  return b;
}

Result<SecureInitiator> SecureInitiator::start(const LocalSecurity& local,
                                               const StaticKeyRecord& peer, uint64_t token,
                                               const Hello& hello, int peer_rank,
                                               std::vector<uint8_t>& out) {
  security::Preamble preamble{security::choose_suite(local.has_aes, peer.has_aes), local.mode};
  const auto binding = job_binding(token);
  auto prologue = security::build_prologue(preamble, binding);
  if (!prologue.ok()) return prologue.status();
  security::HandshakeConfig config;
  config.role = security::Role::initiator;
  config.suite = preamble.suite;
  config.prologue = prologue.value();
  config.psk = local.job_key->bytes();
  config.local_static = &local.static_key;
  config.remote_static = peer.key;
  auto hs = security::NoiseHandshake::create(config);
  if (!hs.ok()) return hs.status();
  uint8_t payload[kHelloPayload];
  encode_hello(hello, payload);
  auto m1 = hs->write_message1(security::Bytes(payload, sizeof(payload)));
  if (!m1.ok()) return m1.status();
  const auto pre = security::encode_preamble(preamble);
  out.assign(pre.begin(), pre.end());
  out.insert(out.end(), m1->begin(), m1->end());
  return SecureInitiator(std::move(hs.value()), local.mode, peer_rank);
}

Status SecureInitiator::finish(std::span<const uint8_t> message2, LinkCrypto& crypto,
                               std::vector<uint8_t>& confirm) {
  auto payload = hs_.read_message2(message2);
  if (!payload.ok()) {
    return Status(payload.status().code(),
                  fmt::format("{} (is the job key the same on every rank?)",
                              payload.status().message()));
  }
  if (!payload->empty()) {
    return Status(ErrorCode::protocol,
                  fmt::format("handshake with rank {}: unexpected payload in message 2", peer_));
  }
  WEFT_RETURN_IF_ERROR(make_crypto(hs_, mode_, peer_, crypto));
  confirm.resize(kConfirmBytes);
  return crypto.sealer->seal(security::Bytes(), confirm);
}

Result<SecureResponder> SecureResponder::create(const LocalSecurity& local, uint64_t token,
                                                std::span<const uint8_t, kSecureHelloBytes> first,
                                                Opened& opened) {
  auto preamble =
      security::decode_preamble(first.subspan<0, security::kPreambleBytes>());
  if (!preamble.ok()) return preamble.status();
  if (preamble->mode != local.mode) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("security mode {} offered, this rank runs {}",
                              security::to_string(preamble->mode),
                              security::to_string(local.mode)));
  }
  const auto binding = job_binding(token);
  auto prologue = security::build_prologue(preamble.value(), binding);
  if (!prologue.ok()) return prologue.status();
  security::HandshakeConfig config;
  config.role = security::Role::responder;
  config.suite = preamble->suite;
  config.prologue = prologue.value();
  config.psk = local.job_key->bytes();
  config.local_static = &local.static_key;
  auto hs = security::NoiseHandshake::create(config);
  if (!hs.ok()) return hs.status();
  auto payload = hs->read_message1(first.subspan(security::kPreambleBytes));
  if (!payload.ok()) return payload.status();
  if (payload->size() != kHelloPayload) {
    return Status(ErrorCode::protocol, "message 1 does not carry a HELLO");
  }
  opened.hello = decode_hello(payload->data());
  opened.initiator_key = hs->remote_static();
  auto answer = hs->write_message2(security::Bytes());
  if (!answer.ok()) return answer.status();
  opened.answer = std::move(answer.value());
  SecureResponder r;
  // The claimed rank names the peer in record errors; it is checked by the caller against the
  // store and proven by confirm().
  WEFT_RETURN_IF_ERROR(make_crypto(hs.value(), preamble->mode,
                                   static_cast<int>(std::min<uint32_t>(opened.hello.rank, 1u << 30)),
                                   r.crypto_));
  return r;
}

Status SecureResponder::confirm(std::span<uint8_t, kConfirmBytes> record, int rank,
                                LinkCrypto& crypto) {
  auto payload = crypto_.opener->open(std::span<uint8_t>(record));
  if (!payload.ok()) {
    return Status(ErrorCode::protocol,
                  fmt::format("the confirmation record claiming rank {} did not open (a wrong job "
                              "key, or a replayed handshake)", rank));
  }
  if (!payload->empty()) {
    return Status(ErrorCode::protocol, "the confirmation record is not empty");
  }
  crypto = std::move(crypto_);
  return Status();
}

}  // namespace weft::tcp
