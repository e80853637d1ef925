// weft::ps: the client of weft's parameter server (docs/parameter-server.md).
//
// A parameter server is N shard processes (`weft ps serve --shard I --of N`), each holding
// partitions of named tensors. A worker declares a tensor (init), pushes gradients (push) and
// pulls weights (pull); the shard aggregates the workers' gradients with weft's reduction
// kernels and applies an optimizer (SGD, momentum, Adam). Tensors larger than 4 MiB are split
// into partitions spread over the shards by partition_map(), a pure function every client
// computes the same way.
//
// Consistency per tensor: bsp (version v+1 exists once every worker's push from v is applied,
// summed in worker order, so the result does not depend on arrival order), async (every push
// applied on arrival) and ssp (bounded staleness s: a push from base version b is applied while
// current - b <= s, else rejected and counted; a pull waits while the puller is more than s
// pushes ahead of the slowest worker).
//
// Ownership and threads: a Client owns its connections (one gRPC channel per shard) and, once an
// *_async call was made, one thread that runs those in order; the caller keeps every buffer it
// passes until the call returns (or its Work is done). A Client may be used from several threads
// at once; destroying it finishes the *_async calls still queued. Every call ends within ClientOptions::timeout: a shard
// that is gone is an error naming it, never a hang. Errors are Status values: invalid_argument
// (bad spec or buffer), not_found (unknown tensor), mismatch (a push that does not fit the
// tensor's state), timeout, peer_lost (a shard unreachable), aborted (refused: wrong job token).
//
// This header is the API of libweft_ps (built when gRPC is found, WEFT_BUILD_PS), not of libweft.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/status.h"
#include "weft/store.h"
#include "weft/types.h"
#include "weft/work.h"

namespace weft::ps {

enum class Mode : uint8_t { bsp, async, ssp };
enum class OptimizerKind : uint8_t { sgd, momentum, adam };

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::sgd;
  float lr = 0.01f;
  float momentum = 0.9f;  // momentum
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam
};

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::fp32;  // fp32, fp16 or bf16
  std::vector<uint64_t> shape;      // elements = the product ({} is a scalar)
  Mode mode = Mode::bsp;
  uint32_t staleness = 0;             // ssp only
  ReduceOp aggregate = ReduceOp::sum;  // sum or avg (avg: bsp only, divides by num_workers)
  OptimizerSpec optimizer;
  uint32_t num_workers = 1;
};

// Where a partition of a tensor lives. Partition p covers elements [offset, offset + count).
struct Partition {
  uint32_t part = 0;
  size_t offset = 0;
  size_t count = 0;
  int shard = 0;
};

// Bytes per partition (the last may be smaller); a partition holds whole elements.
inline constexpr size_t kPartitionBytes = size_t{4} << 20;

// The partitions of a tensor of `count` elements of `dtype` over `num_shards` shards: ceil(count
// / (kPartitionBytes / dtype_size)) partitions (one when count is 0); partition p lives on shard
// (fnv1a64(name) + p) mod num_shards. Pure: every client and shard computes the same map.
WEFT_API std::vector<Partition> partition_map(const std::string& name, size_t count,
                                              DataType dtype, int num_shards);

struct ClientOptions {
  uint32_t worker = 0;  // this worker's rank among the tensor's num_workers
  // Sent with every call; a shard of another job refuses the call. Client::from_env fills it
  // from the job's namespace (WEFT_JOB_ID or the job key) when empty, as `weft ps serve` does.
  std::string job_token;
  std::chrono::milliseconds timeout{30000};  // per call, waiting included
  size_t chunk_bytes = size_t{1} << 20;  // Push stream chunks, kept within 1-4 MiB
};

struct PushResult {
  bool applied = true;      // false: rejected as too stale (ssp)
  uint64_t version = 0;     // the lowest current version over the tensor's partitions
  uint64_t rejected = 0;    // partitions that rejected this push
};

struct ShardStats {
  int shard = 0;
  uint64_t partitions = 0, pushes_applied = 0, rejected_stale = 0, streams_dropped = 0,
           bad_requests = 0, bytes_pushed = 0, bytes_pulled = 0;
};

// The four timestamps of one Clock exchange (system_clock, ns since the epoch).
struct ClockSample {
  int64_t client_send_ns = 0, server_receive_ns = 0, server_send_ns = 0, client_receive_ns = 0;
};

class WEFT_API Client {
 public:
  // Connects to the shards at "host:port" (shard i = addresses[i]).
  static Result<std::unique_ptr<Client>> connect(const std::vector<std::string>& addresses,
                                                 ClientOptions options);
  // Reads ps/num_shards and ps/shard/<i> from a job's store (waiting up to options.timeout).
  static Result<std::unique_ptr<Client>> connect_store(Store& store, ClientOptions options);
  // The job's store from the launcher's variables (weft run, torchrun, Slurm, WEFT_STORE_ADDR),
  // as `weft ps serve` finds it; the worker rank defaults to the launcher's rank.
  static Result<std::unique_ptr<Client>> from_env(ClientOptions options);

  virtual ~Client() = default;
  virtual int num_shards() const = 0;

  // Declares the tensor on every shard that holds a partition of it; `initial` (may be null:
  // zeros) holds its elements. Idempotent across workers.
  virtual Status init(const TensorSpec& spec, const void* initial) = 0;
  // Pushes a gradient of `count` elements computed from `base_version`.
  virtual Result<PushResult> push(const std::string& name, const void* grad, size_t count,
                                  DataType dtype, uint64_t base_version) = 0;
  // Pulls the tensor into `out` once every partition has at least `min_version`; returns the
  // lowest version pulled.
  virtual Result<uint64_t> pull(const std::string& name, void* out, size_t count, DataType dtype,
                                uint64_t min_version) = 0;
  // push, then pull of base_version + 1 (bsp, async) or of what is there (ssp and rejections).
  virtual Result<uint64_t> push_pull(const std::string& name, const void* grad, void* out,
                                     size_t count, DataType dtype, uint64_t base_version) = 0;
  // Unary SendGradients instead of a stream (one message per partition).
  virtual Result<PushResult> send_gradients(const std::string& name, const void* grad,
                                            size_t count, DataType dtype,
                                            uint64_t base_version) = 0;
  // The same calls started on the client's own thread, which runs them one after another in call
  // order (push_async then pull_async pulls after the push); the Work's status is the call's.
  // `result` / `version` (may be null) are filled before the Work completes; the buffers stay
  // the caller's until then.
  virtual WorkPtr push_async(const std::string& name, const void* grad, size_t count,
                             DataType dtype, uint64_t base_version,
                             PushResult* result = nullptr) = 0;
  virtual WorkPtr pull_async(const std::string& name, void* out, size_t count, DataType dtype,
                             uint64_t min_version, uint64_t* version = nullptr) = 0;
  virtual WorkPtr push_pull_async(const std::string& name, const void* grad, void* out,
                                  size_t count, DataType dtype, uint64_t base_version,
                                  uint64_t* version = nullptr) = 0;

  virtual Result<ShardStats> stats(int shard) = 0;
  virtual Result<ClockSample> clock(int shard) = 0;
};

}  // namespace weft::ps
