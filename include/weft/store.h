// Store: the key-value service ranks use to find each other (rendezvous).
//
// Implementations: an in-memory store (ranks as threads of one process), a file store (a shared
// directory), a TCP store (a server embedded in rank 0 or run standalone with `weft store`) and a
// prefix store that namespaces another store. All are safe to call from several threads at once.
// Every call that waits takes a timeout and returns ErrorCode::timeout when it passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/export.h"
#include "weft/status.h"

namespace weft {

using Bytes = std::vector<uint8_t>;

class WEFT_API Store {
 public:
  virtual ~Store() = default;

  // Sets key to value, replacing any earlier value, and wakes every waiter on that key.
  virtual Status set(std::string_view key, const Bytes& value) = 0;
  // Waits until key exists (up to timeout) and returns its value.
  virtual Result<Bytes> get(std::string_view key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to the integer stored at key (missing = 0) and returns the new value.
  virtual Result<int64_t> add(std::string_view key, int64_t delta) = 0;
  // Waits until every key exists.
  virtual Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // True when every key exists now; does not wait.
  virtual Result<bool> check(const std::vector<std::string>& keys) = 0;
  // Removes key; ok whether or not it existed.
  virtual Status erase(std::string_view key) = 0;
  // Waits until every key exists (up to timeout) and returns their values in the order of `keys`.
  // The TCP store answers in one round trip (a job's set-up reads every rank's address this way:
  // one request per rank, not one per pair); the default asks for one key after the other.
  virtual Result<std::vector<Bytes>> multi_get(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout);

  Status set(std::string_view key, std::string_view value) {
    return set(key, Bytes(value.begin(), value.end()));
  }
  Result<std::string> get_string(std::string_view key, std::chrono::milliseconds timeout);
};

// In-process store; share one instance between the ranks (threads) of a test.
WEFT_API std::shared_ptr<Store> make_memory_store();

// Store kept in a directory visible to every rank (local disk or a shared file system). One file
// per key, written atomically (write + rename). The directory is created if missing.
WEFT_API Result<std::shared_ptr<Store>> make_file_store(const std::string& directory);

// Prepends "<prefix>/" to every key of `inner`.
WEFT_API std::shared_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> inner);

// Authentication and limits of a TcpStoreServer (docs/rendezvous.md). Values of at most 1 MiB
// are a protocol limit (tcp_store_protocol.h); these bound everything else the server holds.
struct WEFT_API TcpStoreConfig {
  // A job key file (what WEFT_AUTH_KEY_FILE names): every request must carry a MAC with a key
  // derived from it, and a client without the key can neither read nor write. Empty: no
  // authentication (logged as a warning).
  std::string auth_key_file;
  size_t max_data_bytes = size_t{256} << 20;      // keys and values stored
  size_t max_buffered_bytes = size_t{64} << 20;   // requests and replies held, all connections
  size_t max_connections = 1024;                  // also kept below RLIMIT_NOFILE
  // A connection with no request in flight and nothing received for this long is closed.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  // A client that does not take its reply (or finish its hello) for this long is dropped.
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(10)};
};

// What a TcpStoreServer did, for tests and logs. A snapshot; any thread.
struct TcpStoreStats {
  size_t connections = 0;           // open now
  size_t data_bytes = 0;            // keys and values stored
  size_t buffered_bytes = 0;        // requests and replies held now
  size_t peak_buffered_bytes = 0;   // the most ever held at once
  uint64_t rejected_unauthenticated = 0;  // clients dropped for a missing or bad MAC
  uint64_t dropped_idle = 0;        // closed by idle_timeout
  uint64_t dropped_stalled = 0;     // closed by stall_timeout (not reading replies)
  uint64_t refused_busy = 0;        // replies refused because max_buffered_bytes was reached
  uint64_t evicted = 0;             // closed to admit a new client at max_connections
};

// A TCP store server. It runs its own thread; destroying it stops the server and closes every
// client connection. Bind to port 0 to let the kernel choose; port() tells which it got. One
// thread serves every client with non-blocking sockets: a slow client never stalls the others.
class WEFT_API TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual uint16_t port() const = 0;
  virtual TcpStoreStats stats() const = 0;
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string& host, uint16_t port);
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string& host, uint16_t port,
                                                       const TcpStoreConfig& config);
};

// A client of a TcpStoreServer. Connecting retries until `timeout` (the server may start later).
// `timeout` is also the default for calls that do not take one. `auth_key_file`: the job key
// file (WEFT_AUTH_KEY_FILE) when the server authenticates; a client with a key refuses a server
// that does not, and a server with a key refuses a client without it.
WEFT_API Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                         std::chrono::milliseconds timeout);
WEFT_API Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                         std::chrono::milliseconds timeout,
                                                         const std::string& auth_key_file);

}  // namespace weft
