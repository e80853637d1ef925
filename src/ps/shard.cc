// Shard: declaring partitions (with every check Init needs), finding them, counting.
#include "shard.h"

#include <fmt/format.h>

namespace weft::ps {
namespace {

Status bad(std::string message) { return Status(ErrorCode::invalid_argument, std::move(message)); }

// Everything wrong with a declared spec that does not depend on the shard's state.
Status check_spec(const PartitionSpec& s, int shard, int shards) {
  const TensorSpec& t = s.tensor;
  const std::string who = s.label();
  if (t.name.empty()) return bad("a tensor needs a name");
  if (t.name.size() > 256) return bad(fmt::format("tensor name of {} bytes (at most 256)", t.name.size()));
  if (t.dtype != DataType::fp32 && t.dtype != DataType::fp16 && t.dtype != DataType::bf16) {
    return bad(fmt::format("{}: dtype {} (the parameter server holds f32, f16 and bf16)", who,
                           to_string(t.dtype)));
  }
  if (t.num_workers == 0 || t.num_workers > 65536) {
    return bad(fmt::format("{}: num_workers {} (1 to 65536)", who, t.num_workers));
  }
  if (t.aggregate != ReduceOp::sum && t.aggregate != ReduceOp::avg) {
    return bad(fmt::format("{}: aggregate {} (sum or avg)", who, to_string(t.aggregate)));
  }
  if (t.aggregate == ReduceOp::avg && t.mode != Mode::bsp) {
    return bad(fmt::format("{}: aggregate avg needs mode bsp", who));
  }
  if (!(t.optimizer.lr >= 0.0f) || !(t.optimizer.lr < 1e30f)) {
    return bad(fmt::format("{}: learning rate {}", who, t.optimizer.lr));
  }
  uint64_t elements = 1;
  for (uint64_t d : t.shape) {
    if (d != 0 && elements > (uint64_t{1} << 40) / d) {
      return bad(fmt::format("{}: shape [{}] is too large", who, fmt::join(t.shape, ",")));
    }
    elements *= d;
  }
  const std::vector<Partition> map = partition_map(t.name, elements, t.dtype, shards);
  if (s.part >= map.size()) {
    return bad(fmt::format("{}: the tensor has {} partitions", who, map.size()));
  }
  if (map[s.part].shard != shard) {
    return bad(fmt::format("{} belongs to shard {}, not to shard {}", who, map[s.part].shard,
                           shard));
  }
  return Status::success();
}

}  // namespace

Result<InitOutcome> Shard::init(PartitionSpec spec, Bytes initial) {
  WEFT_RETURN_IF_ERROR(check_spec(spec, index_, count_));
  uint64_t elements = 1;
  for (uint64_t d : spec.tensor.shape) elements *= d;
  spec.count = partition_map(spec.tensor.name, elements, spec.tensor.dtype,
                             count_)[spec.part].count;
  const size_t bytes = spec.count * dtype_size(spec.tensor.dtype);
  if (!initial.empty() && initial.size() != bytes) {
    return bad(fmt::format("{}: initial value of {} bytes, the partition has {}", spec.label(),
                           initial.size(), bytes));
  }
  MutexLock lock(mu_);
  auto key = std::make_pair(spec.tensor.name, spec.part);
  auto it = parts_.find(key);
  if (it != parts_.end()) {
    const std::string diff = it->second->spec().difference(spec);
    if (!diff.empty()) {
      return Status(ErrorCode::mismatch,
                    fmt::format("{} exists with another spec: {}", spec.label(), diff));
    }
    return InitOutcome{it->second->version(), false};
  }
  parts_.emplace(std::move(key),
                 std::make_shared<PartitionState>(std::move(spec), std::move(initial)));
  return InitOutcome{0, true};
}

Result<std::shared_ptr<PartitionState>> Shard::find(const std::string& name, uint32_t part) const {
  MutexLock lock(mu_);
  auto it = parts_.find(std::make_pair(name, part));
  if (it == parts_.end()) {
    return Status(ErrorCode::not_found,
                  fmt::format("tensor '{}' partition {} is not declared on shard {} (Init first)",
                              name, part, index_));
  }
  return it->second;
}

void Shard::shutdown() {
  MutexLock lock(mu_);
  for (auto& [key, p] : parts_) p->shutdown();
}

ShardStats Shard::stats() const {
  ShardStats s;
  s.shard = index_;
  {
    MutexLock lock(mu_);
    s.partitions = parts_.size();
  }
  for (const auto& [worker, c] : worker_stats()) {
    s.pushes_applied += c.applied;
    s.rejected_stale += c.rejected_stale;
  }
  s.streams_dropped = counters_.streams_dropped.load();
  s.bad_requests = counters_.bad_requests.load();
  s.bytes_pushed = counters_.bytes_pushed.load();
  s.bytes_pulled = counters_.bytes_pulled.load();
  return s;
}

std::map<uint32_t, WorkerCounters> Shard::worker_stats() const {
  std::map<uint32_t, WorkerCounters> out;
  MutexLock lock(mu_);
  for (const auto& [key, p] : parts_) {
    const std::vector<WorkerCounters> c = p->counters();
    for (uint32_t w = 0; w < c.size(); ++w) {
      out[w].pushes += c[w].pushes;
      out[w].applied += c[w].applied;
      out[w].rejected_stale += c[w].rejected_stale;
    }
  }
  return out;
}

}  // namespace weft::ps
