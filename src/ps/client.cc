// weft::ps::Client (weft/ps.h): one gRPC channel per shard; every call is split by partition_map
// into one gRPC call per partition, with the options' deadline, the shards served at once.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include <fmt/format.h>
#include "grpc.h"

#include "async_runner.h"
#include "codec.h"
#include "discovery.h"
#include "server.h"
#include "weft/ps.h"

namespace weft::ps {
namespace {

Status bad(std::string message) { return Status(ErrorCode::invalid_argument, std::move(message)); }

class ClientImpl final : public Client {
 public:
  explicit ClientImpl(ClientOptions options) : options_(std::move(options)) {
    options_.chunk_bytes =
        std::clamp<size_t>(options_.chunk_bytes, size_t{1} << 20, kPartitionBytes);
  }

  void add_shard(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
    args.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
    Conn c;
    c.address = address;
    c.stub = v1::ParameterServer::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    shards_.push_back(std::move(c));
  }

  int num_shards() const override { return static_cast<int>(shards_.size()); }

  Status init(const TensorSpec& spec, const void* initial) override {
    uint64_t count = 1;
    for (uint64_t d : spec.shape) count *= d;
    WEFT_RETURN_IF_ERROR(check_buffer(spec.name, count, spec.dtype, initial, true));
    const size_t elem = dtype_size(spec.dtype);
    return each_partition(partition_map(spec.name, count, spec.dtype, num_shards()),
                          [&](const Partition& p) {
      v1::InitRequest req;
      to_proto(spec, &req);
      req.set_part(p.part);
      if (initial != nullptr) {
        req.set_initial(static_cast<const char*>(initial) + p.offset * elem, p.count * elem);
      }
      v1::InitReply reply;
      grpc::ClientContext ctx;
      prepare(ctx);
      return from_grpc(shards_[p.shard].stub->Init(&ctx, req, &reply), label(p.shard));
    });
  }

  Result<PushResult> push(const std::string& name, const void* grad, size_t count,
                          DataType dtype, uint64_t base_version) override {
    return push_parts(name, grad, count, dtype, base_version, /*unary=*/false);
  }

  Result<PushResult> send_gradients(const std::string& name, const void* grad, size_t count,
                                    DataType dtype, uint64_t base_version) override {
    return push_parts(name, grad, count, dtype, base_version, /*unary=*/true);
  }

  Result<uint64_t> pull(const std::string& name, void* out, size_t count, DataType dtype,
                        uint64_t min_version) override {
    WEFT_RETURN_IF_ERROR(check_buffer(name, count, dtype, out, false));
    const size_t elem = dtype_size(dtype);
    const std::vector<Partition> parts = partition_map(name, count, dtype, num_shards());
    std::vector<uint64_t> versions(parts.size());
    WEFT_RETURN_IF_ERROR(each_partition(parts, [&](const Partition& p) -> Status {
      v1::PullRequest req;
      req.set_name(name);
      req.set_part(p.part);
      req.set_worker(options_.worker);
      req.set_min_version(min_version);
      grpc::ClientContext ctx;
      prepare(ctx);
      auto reader = shards_[p.shard].stub->Pull(&ctx, req);
      v1::PullChunk chunk;
      size_t got = 0;
      Status shape = Status::success();
      char* dst = static_cast<char*>(out) + p.offset * elem;
      for (bool first = true; reader->Read(&chunk); first = false) {
        if (first) {
          versions[p.part] = chunk.version();
          if (from_proto(chunk.dtype()) != dtype || chunk.count() != p.count) {
            shape = Status(ErrorCode::mismatch,
                           fmt::format("{}: tensor '{}' partition {} holds {} elements of dtype "
                                       "{}, the caller asked for {} of {}",
                                       label(p.shard), name, p.part, chunk.count(),
                                       v1::DType_Name(chunk.dtype()), p.count,
                                       to_string(dtype)));
            ctx.TryCancel();
            break;
          }
        }
        if (chunk.data().size() > p.count * elem - got) {
          shape = Status(ErrorCode::protocol, fmt::format("{}: tensor '{}' partition {}: more "
                                                          "bytes than the partition holds",
                                                          label(p.shard), name, p.part));
          ctx.TryCancel();
          break;
        }
        std::memcpy(dst + got, chunk.data().data(), chunk.data().size());
        got += chunk.data().size();
      }
      const grpc::Status finished = reader->Finish();
      WEFT_RETURN_IF_ERROR(shape);
      WEFT_RETURN_IF_ERROR(from_grpc(finished, label(p.shard)));
      if (got != p.count * elem) {
        return Status(ErrorCode::protocol,
                      fmt::format("{}: tensor '{}' partition {}: {} of {} bytes", label(p.shard),
                                  name, p.part, got, p.count * elem));
      }
      return Status::success();
    }));
    return *std::min_element(versions.begin(), versions.end());
  }

  Result<uint64_t> push_pull(const std::string& name, const void* grad, void* out, size_t count,
                             DataType dtype, uint64_t base_version) override {
    Result<PushResult> pushed = push(name, grad, count, dtype, base_version);
    if (!pushed.ok()) return pushed.status();
    return pull(name, out, count, dtype, pushed->applied ? base_version + 1 : 0);
  }

  WorkPtr push_async(const std::string& name, const void* grad, size_t count, DataType dtype,
                     uint64_t base_version, PushResult* result) override {
    return runner_.submit([=, this]() -> Status {
      Result<PushResult> r = push(name, grad, count, dtype, base_version);
      if (r.ok() && result != nullptr) *result = r.value();
      return r.status();
    });
  }

  WorkPtr pull_async(const std::string& name, void* out, size_t count, DataType dtype,
                     uint64_t min_version, uint64_t* version) override {
    return runner_.submit([=, this]() -> Status {
      Result<uint64_t> r = pull(name, out, count, dtype, min_version);
      if (r.ok() && version != nullptr) *version = r.value();
      return r.status();
    });
  }

  WorkPtr push_pull_async(const std::string& name, const void* grad, void* out, size_t count,
                          DataType dtype, uint64_t base_version, uint64_t* version) override {
    return runner_.submit([=, this]() -> Status {
      Result<uint64_t> r = push_pull(name, grad, out, count, dtype, base_version);
      if (r.ok() && version != nullptr) *version = r.value();
      return r.status();
    });
  }

  Result<ShardStats> stats(int shard) override {
    if (shard < 0 || shard >= num_shards()) return bad(fmt::format("no shard {}", shard));
    grpc::ClientContext ctx;
    prepare(ctx);
    v1::StatsReply r;
    WEFT_RETURN_IF_ERROR(
        from_grpc(shards_[shard].stub->Stats(&ctx, v1::StatsRequest(), &r), label(shard)));
    ShardStats s;
    s.shard = static_cast<int>(r.shard());
    s.partitions = r.partitions();
    s.pushes_applied = r.pushes_applied();
    s.rejected_stale = r.rejected_stale();
    s.streams_dropped = r.streams_dropped();
    s.bad_requests = r.bad_requests();
    s.bytes_pushed = r.bytes_pushed();
    s.bytes_pulled = r.bytes_pulled();
    return s;
  }

  Result<ClockSample> clock(int shard) override {
    if (shard < 0 || shard >= num_shards()) return bad(fmt::format("no shard {}", shard));
    grpc::ClientContext ctx;
    prepare(ctx);
    v1::ClockRequest req;
    ClockSample s;
    s.client_send_ns = system_now_ns();
    req.set_client_send_ns(s.client_send_ns);
    v1::ClockReply r;
    WEFT_RETURN_IF_ERROR(from_grpc(shards_[shard].stub->Clock(&ctx, req, &r), label(shard)));
    s.client_receive_ns = system_now_ns();
    s.server_receive_ns = r.server_receive_ns();
    s.server_send_ns = r.server_send_ns();
    return s;
  }

 private:
  struct Conn {
    std::string address;
    std::unique_ptr<v1::ParameterServer::Stub> stub;
  };

  std::string label(int shard) const {
    return fmt::format("shard {} ({})", shard, shards_[shard].address);
  }

  void prepare(grpc::ClientContext& ctx) const {
    ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    if (!options_.job_token.empty()) ctx.AddMetadata(kTokenKey, options_.job_token);
    ctx.AddMetadata(kWorkerKey, std::to_string(options_.worker));
  }

  Status check_buffer(const std::string& name, size_t count, DataType dtype, const void* data,
                      bool may_be_null) const {
    if (name.empty()) return bad("a tensor needs a name");
    if (dtype != DataType::fp32 && dtype != DataType::fp16 && dtype != DataType::bf16) {
      return bad(fmt::format("tensor '{}': dtype {} (the parameter server holds f32, f16 and "
                             "bf16)", name, to_string(dtype)));
    }
    if (data == nullptr && count > 0 && !may_be_null) {
      return bad(fmt::format("tensor '{}': null buffer for {} elements", name, count));
    }
    return Status::success();
  }

  // Runs `one` for every partition: the partitions of a shard in order, different shards at once
  // (a thread for each shard past the first), so a large tensor moves over every shard's
  // connection together. The first error in partition order is returned.
  Status each_partition(const std::vector<Partition>& parts,
                        const std::function<Status(const Partition&)>& one) const {
    std::vector<Status> results(parts.size());
    std::map<int, std::vector<size_t>> by_shard;
    for (size_t i = 0; i < parts.size(); ++i) by_shard[parts[i].shard].push_back(i);
    auto run = [&](const std::vector<size_t>& indices) {
      for (size_t i : indices) {
        results[i] = one(parts[i]);
        if (!results[i].ok()) return;
      }
    };
    std::vector<std::thread> others;
    for (auto it = by_shard.begin(); it != by_shard.end(); ++it) {
      if (it != by_shard.begin()) others.emplace_back(run, std::cref(it->second));
    }
    if (!by_shard.empty()) run(by_shard.begin()->second);
    for (std::thread& t : others) t.join();
    for (Status& s : results) {
      if (!s.ok()) return s;
    }
    return Status::success();
  }

  // One call per partition: a Push stream of chunk_bytes chunks, or one SendGradients.
  Result<PushResult> push_parts(const std::string& name, const void* grad, size_t count,
                                DataType dtype, uint64_t base_version, bool unary) {
    WEFT_RETURN_IF_ERROR(check_buffer(name, count, dtype, grad, false));
    const size_t elem = dtype_size(dtype);
    const std::vector<Partition> parts = partition_map(name, count, dtype, num_shards());
    std::vector<v1::PushReply> replies(parts.size());
    WEFT_RETURN_IF_ERROR(each_partition(parts, [&](const Partition& p) {
      v1::PushHeader header;
      header.set_name(name);
      header.set_part(p.part);
      header.set_dtype(to_proto(dtype));
      header.set_count(p.count);
      header.set_worker(options_.worker);
      header.set_base_version(base_version);
      const char* src = static_cast<const char*>(grad) + p.offset * elem;
      const size_t bytes = p.count * elem;
      grpc::ClientContext ctx;
      prepare(ctx);
      v1::PushReply& reply = replies[p.part];
      grpc::Status st;
      if (unary) {
        v1::GradientsRequest req;
        *req.mutable_header() = header;
        req.set_data(src, bytes);
        st = shards_[p.shard].stub->SendGradients(&ctx, req, &reply);
      } else {
        auto writer = shards_[p.shard].stub->Push(&ctx, &reply);
        size_t sent = 0;
        do {
          v1::PushChunk chunk;
          if (sent == 0) *chunk.mutable_header() = header;
          const size_t n = std::min(options_.chunk_bytes, bytes - sent);
          chunk.set_data(src + sent, n);
          sent += n;
          if (!writer->Write(chunk)) break;  // the shard ended the call: Finish says why
        } while (sent < bytes);
        writer->WritesDone();
        st = writer->Finish();
      }
      return from_grpc(st, label(p.shard));
    }));
    PushResult result;
    result.version = UINT64_MAX;
    for (const v1::PushReply& reply : replies) {
      if (!reply.applied()) {
        result.applied = false;
        ++result.rejected;
      }
      result.version = std::min(result.version, reply.version());
    }
    return result;
  }

  ClientOptions options_;
  std::vector<Conn> shards_;
  AsyncRunner runner_;  // last: destroyed first, finishing queued calls while the stubs live
};

}  // namespace

Result<std::unique_ptr<Client>> Client::connect(const std::vector<std::string>& addresses,
                                                ClientOptions options) {
  if (addresses.empty()) return bad("a parameter-server client needs at least one shard");
  auto client = std::make_unique<ClientImpl>(std::move(options));
  for (const std::string& a : addresses) client->add_shard(a);
  return std::unique_ptr<Client>(std::move(client));
}

Result<std::unique_ptr<Client>> Client::connect_store(Store& store, ClientOptions options) {
  Result<std::string> n = store.get_string(kNumShardsKey, options.timeout);
  if (!n.ok()) return n.status().with_context("parameter server: no shard published in the store");
  int shards = 0;
  try {
    shards = std::stoi(n.value());
  } catch (const std::exception&) {
  }
  if (shards <= 0 || shards > 65536) {
    return Status(ErrorCode::protocol, fmt::format("{} = '{}' in the store", kNumShardsKey,
                                                   n.value()));
  }
  std::vector<std::string> addresses;
  for (int i = 0; i < shards; ++i) {
    Result<std::string> a = store.get_string(shard_key(i), options.timeout);
    if (!a.ok()) return a.status().with_context(fmt::format("parameter server: shard {}", i));
    addresses.push_back(a.value());
  }
  return connect(addresses, std::move(options));
}

Result<std::unique_ptr<Client>> Client::from_env(ClientOptions options) {
  Result<JobStore> job = open_job_store(current_environment(), "", options.timeout);
  if (!job.ok()) return job.status().with_context("parameter server client");
  if (options.job_token.empty()) options.job_token = job->token;
  if (job->rank >= 0 && options.worker == 0) options.worker = static_cast<uint32_t>(job->rank);
  return connect_store(*job->store, std::move(options));
}

}  // namespace weft::ps
