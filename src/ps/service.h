// Service: the gRPC handlers of one shard (proto/weft/ps/v1/ps.proto) over a Shard. Each handler
// checks the job token, decodes and validates the whole request before touching the partition
// (a push is applied whole or not at all), and answers with a gRPC status that names the tensor,
// partition and worker. gRPC's threads call the handlers concurrently.
#pragma once

#include <string>

#include "shard.h"
#include "grpc.h"

namespace weft::ps {

class Service final : public v1::ParameterServer::Service {
 public:
  // `job_token` empty: calls are not checked.
  Service(Shard& shard, std::string job_token) : shard_(shard), token_(std::move(job_token)) {}

  grpc::Status Init(grpc::ServerContext* ctx, const v1::InitRequest* req,
                    v1::InitReply* reply) override;
  grpc::Status Push(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushChunk>* reader,
                    v1::PushReply* reply) override;
  grpc::Status Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                    grpc::ServerWriter<v1::PullChunk>* writer) override;
  grpc::Status SendGradients(grpc::ServerContext* ctx, const v1::GradientsRequest* req,
                             v1::PushReply* reply) override;
  grpc::Status Stats(grpc::ServerContext* ctx, const v1::StatsRequest* req,
                     v1::StatsReply* reply) override;
  grpc::Status Clock(grpc::ServerContext* ctx, const v1::ClockRequest* req,
                     v1::ClockReply* reply) override;

 private:
  // PERMISSION_DENIED unless the call carries this job's token.
  grpc::Status check_token(grpc::ServerContext* ctx, const char* call);
  // Counts a refused request and converts its status.
  grpc::Status refuse(const Status& s);
  // Applies a whole, checked push to `part`.
  grpc::Status apply_push(PartitionState& part, const v1::PushHeader& h, const std::string& data,
                          v1::PushReply* reply);

  Shard& shard_;
  const std::string token_;
};

}  // namespace weft::ps
