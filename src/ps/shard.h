// Shard: the partitions one shard holds, by (tensor name, partition), and its counters. No gRPC
// here (service.cc translates); any thread. Lock order: Shard::mu_, then a PartitionState's own.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "base/mutex.h"
#include "partition_state.h"

namespace weft::ps {

struct ShardCounters {
  std::atomic<uint64_t> streams_dropped{0};
  std::atomic<uint64_t> bad_requests{0};
  std::atomic<uint64_t> bytes_pushed{0};
  std::atomic<uint64_t> bytes_pulled{0};
};

struct InitOutcome {
  uint64_t version = 0;
  bool created = false;
};

class Shard {
 public:
  Shard(int index, int count) : index_(index), count_(count) {}

  int index() const { return index_; }
  int count() const { return count_; }

  // Declares a partition: checks the spec (dtype, shape, mode, workers, optimizer, that this
  // shard owns the partition by partition_map) and the initial value's size. Errors:
  // invalid_argument; mismatch when it exists with another spec.
  Result<InitOutcome> init(PartitionSpec spec, Bytes initial) EXCLUDES(mu_);
  // not_found, naming the tensor and partition, when it was never declared.
  Result<std::shared_ptr<PartitionState>> find(const std::string& name, uint32_t part) const
      EXCLUDES(mu_);
  // Wakes every waiting pull (the server is stopping).
  void shutdown() EXCLUDES(mu_);

  ShardStats stats() const EXCLUDES(mu_);
  std::map<uint32_t, WorkerCounters> worker_stats() const EXCLUDES(mu_);
  ShardCounters& counters() { return counters_; }

 private:
  const int index_, count_;
  mutable Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, std::shared_ptr<PartitionState>> parts_
      GUARDED_BY(mu_);
  ShardCounters counters_;
};

}  // namespace weft::ps
