// weftGetUniqueId and the servers it starts (unique_id.h).
#include "unique_id.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace weft::capi {

struct ServerLease {
  std::string job;
  std::unique_ptr<TcpStoreServer> server;
  ~ServerLease();
};

namespace {

constexpr char kMagic[8] = {'w', 'e', 'f', 't', 'i', 'd', '0', '1'};
constexpr size_t kPortAt = 8, kJobAt = 10, kJobBytes = 16, kHostAt = 26, kHostBytes = 64;
constexpr size_t kKeyedAt = kHostAt + kHostBytes;
static_assert(kKeyedAt < WEFT_UNIQUE_ID_BYTES);

// The servers this process serves ids from, by job namespace. `held` keeps a server alive for
// an id no communicator uses yet; `lease` finds it for the communicators that do.
struct Served {
  std::shared_ptr<ServerLease> held;
  std::weak_ptr<ServerLease> lease;
};
std::mutex served_mu;
std::map<std::string, Served>& served() {  // guarded by served_mu
  static auto* map = new std::map<std::string, Served>;  // never destroyed: leases outlive exit
  return *map;
}

std::string random_job() {
  std::random_device random;  // /dev/urandom on Linux
  static const char kHex[] = "0123456789abcdef";
  std::string job;
  for (size_t i = 0; i < kJobBytes; ++i) {
    const unsigned byte = random() & 0xffu;
    job += kHex[byte >> 4];
    job += kHex[byte & 0xfu];
  }
  return job;
}

// This host's first non-loopback IPv4 address that is up, else 127.0.0.1.
std::string host_address() {
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) {
      found = text;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

Status bad_id(const std::string& what) {
  return Status(ErrorCode::invalid_argument, "weftCommInitRank: the id " + what +
                                                 " (not one weftGetUniqueId made?)");
}

}  // namespace

ServerLease::~ServerLease() {
  std::lock_guard lock(served_mu);
  auto it = served().find(job);
  if (it != served().end() && it->second.lease.expired()) served().erase(it);
}

Result<UniqueId> parse_unique_id(const weftUniqueId& id) {
  const char* b = id.internal;
  if (std::memcmp(b, kMagic, sizeof kMagic) != 0) return bad_id("has no weft id header");
  UniqueId out;
  out.port = static_cast<uint16_t>((static_cast<uint8_t>(b[kPortAt]) << 8) |
                                   static_cast<uint8_t>(b[kPortAt + 1]));
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < kJobBytes; ++i) {
    const auto byte = static_cast<uint8_t>(b[kJobAt + i]);
    out.job += kHex[byte >> 4];
    out.job += kHex[byte & 0xfu];
  }
  const size_t host_len = strnlen(b + kHostAt, kHostBytes);
  if (host_len == 0 || host_len == kHostBytes) return bad_id("names no store host");
  out.host.assign(b + kHostAt, host_len);
  if (out.port == 0) return bad_id("names no store port");
  out.keyed = b[kKeyedAt] == 1;
  return out;
}

Result<weftUniqueId> make_unique_id(const std::string& key_file) {
  TcpStoreConfig config;
  config.auth_key_file = key_file;
  auto server = TcpStoreServer::start("", 0, config);
  if (!server.ok()) return server.status().with_context("weftGetUniqueId: cannot start a store");
  auto lease = std::make_shared<ServerLease>();
  lease->job = random_job();
  lease->server = std::move(server.value());
  const std::string host = host_address();

  weftUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::memcpy(id.internal, kMagic, sizeof kMagic);
  const uint16_t port = lease->server->port();
  id.internal[kPortAt] = static_cast<char>(port >> 8);
  id.internal[kPortAt + 1] = static_cast<char>(port & 0xff);
  for (size_t i = 0; i < kJobBytes; ++i) {
    id.internal[kJobAt + i] =
        static_cast<char>(std::stoi(lease->job.substr(2 * i, 2), nullptr, 16));
  }
  std::memcpy(id.internal + kHostAt, host.data(), std::min(host.size(), kHostBytes - 1));
  id.internal[kKeyedAt] = key_file.empty() ? 0 : 1;

  std::lock_guard lock(served_mu);
  served()[lease->job] = Served{lease, lease};
  return id;
}

std::shared_ptr<ServerLease> lease_for(const UniqueId& id) {
  std::lock_guard lock(served_mu);
  auto it = served().find(id.job);
  if (it == served().end()) return nullptr;
  return it->second.lease.lock();
}

void release_id_hold(const UniqueId& id) {
  std::shared_ptr<ServerLease> held;  // destroyed after the lock is released
  std::lock_guard lock(served_mu);
  auto it = served().find(id.job);
  if (it != served().end()) held = std::move(it->second.held);
}

}  // namespace weft::capi
