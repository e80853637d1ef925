// ShardServer: the gRPC server of one shard.
#include "server.h"

#include <unistd.h>

#include <chrono>

#include <fmt/format.h>
#include "grpc.h"

#include "base/log.h"
#include "base/socket.h"
#include "codec.h"
#include "service.h"
#include "shard.h"

namespace weft::ps {
namespace {

class ShardServerImpl final : public ShardServer {
 public:
  ShardServerImpl(const ServerOptions& o)
      : shard_(o.shard, o.num_shards), service_(shard_, o.job_token) {}
  ~ShardServerImpl() override {
    stop();
    server_.reset();  // gRPC 1.51 now and then takes 10 s here (in grpc::Server's destructor)
  }

  Status start(const ServerOptions& o) {
    grpc::ServerBuilder builder;
    int selected = 0;
    const std::string bind = host_port(o.host, o.port);
    builder.AddListeningPort(bind, grpc::InsecureServerCredentials(), &selected);
    // Chunks and unary partitions are at most 4 MiB: anything much larger is refused by gRPC
    // (RESOURCE_EXHAUSTED) before a handler sees it.
    builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
    builder.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (!server_ || selected == 0) {
      return Status(ErrorCode::io, fmt::format("shard {}: cannot listen on {}", o.shard, bind));
    }
    port_ = static_cast<uint16_t>(selected);
    std::string host = o.host;
    if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
      char name[256] = {};
      host = gethostname(name, sizeof(name) - 1) == 0 ? name : "127.0.0.1";
    }
    address_ = host_port(host, port_);
    log::info("ps shard {} of {} serving on {}", o.shard, o.num_shards, address_);
    return Status::success();
  }

  uint16_t port() const override { return port_; }
  std::string address() const override { return address_; }
  Shard& shard() override { return shard_; }

  void stop() override {
    if (!server_ || stopped_) return;
    stopped_ = true;
    shard_.shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
  }

 private:
  Shard shard_;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  bool stopped_ = false;  // stop() ran (the owner's thread only)
  uint16_t port_ = 0;
  std::string address_;
};

}  // namespace

Result<std::unique_ptr<ShardServer>> ShardServer::start(const ServerOptions& o) {
  if (o.num_shards <= 0 || o.shard < 0 || o.shard >= o.num_shards) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("shard {} of {}: the index must be in [0, {})", o.shard,
                              o.num_shards, o.num_shards));
  }
  auto server = std::make_unique<ShardServerImpl>(o);
  WEFT_RETURN_IF_ERROR(server->start(o));
  return std::unique_ptr<ShardServer>(std::move(server));
}

std::string shard_key(int index) { return fmt::format("ps/shard/{}", index); }

Status publish_shard(Store& store, int index, int num_shards, const std::string& address) {
  WEFT_RETURN_IF_ERROR(store.set(kNumShardsKey, std::to_string(num_shards)));
  return store.set(shard_key(index), address);
}

}  // namespace weft::ps
