// Service: the shard's gRPC handlers.
#include "service.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "codec.h"

namespace weft::ps {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The call's deadline on the steady clock (an hour when the client set none).
SteadyClock::time_point steady_deadline(const grpc::ServerContext* ctx) {
  const auto left = ctx->deadline() - std::chrono::system_clock::now();
  const auto cap = std::chrono::hours(1);
  return SteadyClock::now() + std::clamp<std::chrono::system_clock::duration>(
                                  left, std::chrono::system_clock::duration::zero(), cap);
}

std::string metadata(const grpc::ServerContext* ctx, const char* key) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(key);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Checks a push's header against the partition before any byte is taken.
Status check_header(const v1::PushHeader& h, const PartitionSpec& spec) {
  std::optional<DataType> dtype = from_proto(h.dtype());
  if (!dtype || *dtype != spec.tensor.dtype) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("{}: worker {} pushed dtype {}, the tensor is {}", spec.label(),
                              h.worker(), dtype ? to_string(*dtype) : "unknown",
                              to_string(spec.tensor.dtype)));
  }
  if (h.count() != spec.count) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("{}: worker {} pushed {} elements, the partition has {}",
                              spec.label(), h.worker(), h.count(), spec.count));
  }
  return spec.check_worker(h.worker());
}

}  // namespace

grpc::Status Service::refuse(const Status& s) {
  if (s.code() == ErrorCode::invalid_argument || s.code() == ErrorCode::not_found) {
    shard_.counters().bad_requests.fetch_add(1);
  }
  return to_grpc(s);
}

grpc::Status Service::check_token(grpc::ServerContext* ctx, const char* call) {
  if (token_.empty() || metadata(ctx, kTokenKey) == token_) return grpc::Status::OK;
  shard_.counters().bad_requests.fetch_add(1);
  const std::string worker = metadata(ctx, kWorkerKey);
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      fmt::format("shard {}: {} from worker {} ({}) refused: it carries the job "
                                  "token of another job",
                                  shard_.index(), call, worker.empty() ? "?" : worker,
                                  ctx->peer()));
}

grpc::Status Service::Init(grpc::ServerContext* ctx, const v1::InitRequest* req,
                           v1::InitReply* reply) {
  if (grpc::Status t = check_token(ctx, "Init"); !t.ok()) return t;
  Result<TensorSpec> spec = from_proto(*req);
  if (!spec.ok()) return refuse(spec.status());
  PartitionSpec ps;
  ps.tensor = std::move(spec.value());
  ps.part = req->part();
  Result<InitOutcome> out =
      shard_.init(std::move(ps), Bytes(req->initial().begin(), req->initial().end()));
  if (!out.ok()) return refuse(out.status());
  reply->set_version(out->version);
  reply->set_created(out->created);
  return grpc::Status::OK;
}

grpc::Status Service::apply_push(PartitionState& part, const v1::PushHeader& h,
                                 const std::string& data, v1::PushReply* reply) {
  Result<PushOutcome> out = part.push(
      h.worker(), h.base_version(), reinterpret_cast<const uint8_t*>(data.data()), data.size());
  if (!out.ok()) return refuse(out.status());
  shard_.counters().bytes_pushed.fetch_add(data.size());
  reply->set_applied(out->applied);
  reply->set_version(out->version);
  reply->set_rejected_stale(out->rejected_stale);
  return grpc::Status::OK;
}

grpc::Status Service::Push(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushChunk>* reader,
                           v1::PushReply* reply) {
  if (grpc::Status t = check_token(ctx, "Push"); !t.ok()) return t;
  v1::PushChunk chunk;
  if (!reader->Read(&chunk)) {
    shard_.counters().streams_dropped.fetch_add(1);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("shard {}: a Push stream ended before its header",
                                    shard_.index()));
  }
  if (!chunk.has_header()) {
    return refuse(Status(ErrorCode::invalid_argument,
                         fmt::format("shard {}: the first chunk of a Push has no header",
                                     shard_.index())));
  }
  const v1::PushHeader header = chunk.header();
  Result<std::shared_ptr<PartitionState>> part = shard_.find(header.name(), header.part());
  if (!part.ok()) return refuse(part.status());
  const PartitionSpec& spec = part.value()->spec();
  if (Status s = check_header(header, spec); !s.ok()) return refuse(s);
  const size_t expected = spec.count * dtype_size(spec.tensor.dtype);
  std::string data;
  data.reserve(expected);
  for (bool first = true;; first = false) {
    if (!first && chunk.has_header()) {
      return refuse(Status(ErrorCode::invalid_argument,
                           fmt::format("{}: worker {} sent a second header", spec.label(),
                                       header.worker())));
    }
    if (chunk.data().size() > expected - data.size()) {
      return refuse(Status(ErrorCode::invalid_argument,
                           fmt::format("{}: worker {} pushed more than the partition's {} bytes",
                                       spec.label(), header.worker(), expected)));
    }
    data.append(chunk.data());
    if (!reader->Read(&chunk)) break;
  }
  if (data.size() != expected || ctx->IsCancelled()) {
    // The stream ended early (the client went away or stopped sending): nothing is applied.
    shard_.counters().streams_dropped.fetch_add(1);
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        fmt::format("{}: worker {}'s push ended after {} of {} bytes; nothing "
                                    "was applied",
                                    spec.label(), header.worker(), data.size(), expected));
  }
  return apply_push(*part.value(), header, data, reply);
}

grpc::Status Service::SendGradients(grpc::ServerContext* ctx, const v1::GradientsRequest* req,
                                    v1::PushReply* reply) {
  if (grpc::Status t = check_token(ctx, "SendGradients"); !t.ok()) return t;
  Result<std::shared_ptr<PartitionState>> part = shard_.find(req->header().name(),
                                                              req->header().part());
  if (!part.ok()) return refuse(part.status());
  if (Status s = check_header(req->header(), part.value()->spec()); !s.ok()) return refuse(s);
  return apply_push(*part.value(), req->header(), req->data(), reply);
}

grpc::Status Service::Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                           grpc::ServerWriter<v1::PullChunk>* writer) {
  if (grpc::Status t = check_token(ctx, "Pull"); !t.ok()) return t;
  Result<std::shared_ptr<PartitionState>> part = shard_.find(req->name(), req->part());
  if (!part.ok()) return refuse(part.status());
  Result<PullSnapshot> snap = part.value()->pull(req->worker(), req->min_version(),
                                                 steady_deadline(ctx),
                                                 [ctx] { return ctx->IsCancelled(); });
  if (!snap.ok()) return refuse(snap.status());
  const PartitionSpec& spec = part.value()->spec();
  const Bytes& data = snap->data;
  constexpr size_t kChunk = size_t{1} << 20;
  size_t offset = 0;
  do {
    v1::PullChunk chunk;
    if (offset == 0) {
      chunk.set_version(snap->version);
      chunk.set_dtype(to_proto(spec.tensor.dtype));
      chunk.set_count(spec.count);
    }
    const size_t n = std::min(kChunk, data.size() - offset);
    chunk.set_data(reinterpret_cast<const char*>(data.data()) + offset, n);
    offset += n;
    if (!writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          fmt::format("{}: worker {} went away during its pull", spec.label(),
                                      req->worker()));
    }
  } while (offset < data.size());
  shard_.counters().bytes_pulled.fetch_add(data.size());
  return grpc::Status::OK;
}

grpc::Status Service::Stats(grpc::ServerContext* ctx, const v1::StatsRequest*,
                            v1::StatsReply* reply) {
  if (grpc::Status t = check_token(ctx, "Stats"); !t.ok()) return t;
  const ShardStats s = shard_.stats();
  reply->set_shard(static_cast<uint32_t>(s.shard));
  reply->set_num_shards(static_cast<uint32_t>(shard_.count()));
  reply->set_partitions(s.partitions);
  reply->set_pushes_applied(s.pushes_applied);
  reply->set_rejected_stale(s.rejected_stale);
  reply->set_streams_dropped(s.streams_dropped);
  reply->set_bad_requests(s.bad_requests);
  reply->set_bytes_pushed(s.bytes_pushed);
  reply->set_bytes_pulled(s.bytes_pulled);
  for (const auto& [worker, c] : shard_.worker_stats()) {
    v1::WorkerStats* w = reply->add_workers();
    w->set_worker(worker);
    w->set_pushes_applied(c.applied);
    w->set_rejected_stale(c.rejected_stale);
  }
  return grpc::Status::OK;
}

grpc::Status Service::Clock(grpc::ServerContext* ctx, const v1::ClockRequest* req,
                            v1::ClockReply* reply) {
  const int64_t received = system_now_ns();
  if (grpc::Status t = check_token(ctx, "Clock"); !t.ok()) return t;
  reply->set_client_send_ns(req->client_send_ns());
  reply->set_server_receive_ns(received);
  reply->set_server_send_ns(system_now_ns());
  return grpc::Status::OK;
}

}  // namespace weft::ps
