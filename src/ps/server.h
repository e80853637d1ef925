// ShardServer: one parameter-server shard serving gRPC (docs/parameter-server.md). start() binds
// (port 0: the kernel chooses; port() says which), serves on gRPC's threads until the server is
// destroyed or stop() is called; stop() ends waiting pulls with ABORTED, cancels the calls still
// running after a short grace period and returns once none runs. Destroying it releases gRPC's
// server, which now and then takes 10 s in gRPC 1.51 (a process about to exit may skip it). publish_shard() writes its address into the job's
// store for clients (Client::connect_store).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "weft/status.h"
#include "weft/store.h"

namespace weft::ps {

class Shard;

struct ServerOptions {
  int shard = 0;
  int num_shards = 1;
  std::string host = "127.0.0.1";  // "0.0.0.0" or "[::]": every address
  uint16_t port = 0;
  // Calls must carry it in the "weft-job-token" metadata (empty: not checked).
  std::string job_token;
};

class ShardServer {
 public:
  static Result<std::unique_ptr<ShardServer>> start(const ServerOptions& options);
  virtual ~ShardServer() = default;

  virtual uint16_t port() const = 0;
  // "host:port" as clients should dial it.
  virtual std::string address() const = 0;
  virtual Shard& shard() = 0;
  virtual void stop() = 0;
};

// Sets ps/shard/<index> = address and ps/num_shards = num_shards in `store`.
Status publish_shard(Store& store, int index, int num_shards, const std::string& address);

// The keys (also read by the client).
std::string shard_key(int index);
inline constexpr const char* kNumShardsKey = "ps/num_shards";

}  // namespace weft::ps
