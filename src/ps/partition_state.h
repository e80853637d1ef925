// PartitionState: one partition of a tensor on a shard: its weights, version, optimizer and the
// consistency rules of its mode (docs/parameter-server.md). No gRPC here: the service decodes a
// request, calls push() or pull() with whole buffers, and encodes the answer, so a push is
// applied whole or not at all. Any thread; one mutex per partition (no other lock is taken while
// it is held).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "optimizer.h"
#include "weft/ps.h"
#include "weft/status.h"
#include "weft/store.h"

namespace weft::ps {

// The spec of one partition, as Init declared it.
struct PartitionSpec {
  TensorSpec tensor;
  uint32_t part = 0;
  size_t count = 0;  // elements in this partition

  // "tensor 'w' partition 2"
  std::string label() const;
  // invalid_argument unless worker < tensor.num_workers.
  Status check_worker(uint32_t worker) const;
  // Empty when equal, else what differs ("dtype f32 vs f16").
  std::string difference(const PartitionSpec& other) const;
};

struct PushOutcome {
  bool applied = true;
  uint64_t version = 0;       // current version after the push
  uint64_t rejected_stale = 0;  // this worker's rejections on this partition so far
};

struct PullSnapshot {
  uint64_t version = 0;
  Bytes data;
};

struct WorkerCounters {
  uint64_t pushes = 0;  // accepted or rejected: the worker's clock (ssp)
  uint64_t applied = 0;
  uint64_t rejected_stale = 0;
};

class PartitionState {
 public:
  using Clock = std::chrono::steady_clock;

  // `initial`: empty (zeros) or exactly count * dtype_size bytes (the caller checked).
  PartitionState(PartitionSpec spec, Bytes initial);

  const PartitionSpec& spec() const { return spec_; }

  // Applies (or, in bsp, stages) a whole gradient of `worker` computed from `base_version`.
  // Errors: invalid_argument (worker out of range, wrong size), mismatch (a base version or a
  // second push the mode does not allow).
  Result<PushOutcome> push(uint32_t worker, uint64_t base_version, const uint8_t* data,
                           size_t bytes) EXCLUDES(mu_);
  // Waits until version >= min_version (and, in ssp, until `worker` is at most `staleness` pushes
  // ahead of the slowest worker), then copies the weights. timeout at `deadline`; aborted when
  // `cancelled` says so (checked every 50 ms) or on shutdown().
  Result<PullSnapshot> pull(uint32_t worker, uint64_t min_version, Clock::time_point deadline,
                            const std::function<bool()>& cancelled) EXCLUDES(mu_);
  // Wakes every waiting pull with aborted.
  void shutdown() EXCLUDES(mu_);

  uint64_t version() const EXCLUDES(mu_);
  std::vector<WorkerCounters> counters() const EXCLUDES(mu_);

 private:
  void apply(const uint8_t* grad) REQUIRES(mu_);
  bool pull_ready(uint32_t worker, uint64_t min_version) const REQUIRES(mu_);

  const PartitionSpec spec_;
  const size_t bytes_;
  mutable Mutex mu_;
  std::condition_variable changed_;  // version advanced, a worker pushed, or shutdown
  Bytes weights_ GUARDED_BY(mu_);
  uint64_t version_ GUARDED_BY(mu_) = 0;
  Optimizer optimizer_ GUARDED_BY(mu_);
  // bsp: the gradients staged for version_, one slot per worker, summed in worker order.
  std::vector<std::optional<Bytes>> staged_ GUARDED_BY(mu_);
  uint32_t staged_count_ GUARDED_BY(mu_) = 0;
  Bytes sum_ GUARDED_BY(mu_);  // scratch for the bsp sum
  std::vector<WorkerCounters> workers_ GUARDED_BY(mu_);
  bool shut_down_ GUARDED_BY(mu_) = false;
};

}  // namespace weft::ps
