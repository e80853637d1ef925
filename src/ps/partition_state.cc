// PartitionState: bsp staging and the worker-order sum, async and ssp application, waiting pulls.
#include "partition_state.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "reduce/reduce.h"

namespace weft::ps {
namespace {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::bsp: return "bsp";
    case Mode::async: return "async";
    case Mode::ssp: return "ssp";
  }
  return "?";
}

}  // namespace

std::string PartitionSpec::label() const {
  return fmt::format("tensor '{}' partition {}", tensor.name, part);
}

Status PartitionSpec::check_worker(uint32_t worker) const {
  if (worker < tensor.num_workers) return Status::success();
  return Status(ErrorCode::invalid_argument,
                fmt::format("{}: worker {} is out of range (the tensor has {} workers)", label(),
                            worker, tensor.num_workers));
}

std::string PartitionSpec::difference(const PartitionSpec& o) const {
  const TensorSpec &a = tensor, &b = o.tensor;
  if (a.dtype != b.dtype) return fmt::format("dtype {} vs {}", to_string(a.dtype), to_string(b.dtype));
  if (a.shape != b.shape || count != o.count) {
    return fmt::format("shape [{}] vs [{}]", fmt::join(a.shape, ","), fmt::join(b.shape, ","));
  }
  if (a.mode != b.mode || a.staleness != b.staleness) {
    return fmt::format("mode {}:{} vs {}:{}", mode_name(a.mode), a.staleness, mode_name(b.mode),
                       b.staleness);
  }
  if (a.aggregate != b.aggregate) return "aggregate differs";
  if (a.num_workers != b.num_workers) {
    return fmt::format("num_workers {} vs {}", a.num_workers, b.num_workers);
  }
  const OptimizerSpec &p = a.optimizer, &q = b.optimizer;
  if (p.kind != q.kind || p.lr != q.lr || p.momentum != q.momentum || p.beta1 != q.beta1 ||
      p.beta2 != q.beta2 || p.eps != q.eps) {
    return "optimizer differs";
  }
  return "";
}

PartitionState::PartitionState(PartitionSpec spec, Bytes initial)
    : spec_(std::move(spec)),
      bytes_(spec_.count * dtype_size(spec_.tensor.dtype)),
      optimizer_(spec_.tensor.optimizer, spec_.count, spec_.tensor.dtype) {
  MutexLock lock(mu_);
  weights_ = initial.empty() ? Bytes(bytes_, 0) : std::move(initial);
  staged_.resize(spec_.tensor.num_workers);
  workers_.resize(spec_.tensor.num_workers);
}

void PartitionState::apply(const uint8_t* grad) {
  optimizer_.step(weights_.data(), grad);
  ++version_;
}

Result<PushOutcome> PartitionState::push(uint32_t worker, uint64_t base_version,
                                         const uint8_t* data, size_t bytes) {
  WEFT_RETURN_IF_ERROR(spec_.check_worker(worker));
  if (bytes != bytes_) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("{}: worker {} pushed {} bytes, the partition has {} ({} x {})",
                              spec_.label(), worker, bytes, bytes_, to_string(spec_.tensor.dtype),
                              spec_.count));
  }
  MutexLock lock(mu_);
  WorkerCounters& w = workers_[worker];
  PushOutcome out;
  if (base_version > version_) {
    return Status(ErrorCode::mismatch,
                  fmt::format("{}: worker {} pushed from version {}, ahead of the current {}",
                              spec_.label(), worker, base_version, version_));
  }
  switch (spec_.tensor.mode) {
    case Mode::bsp: {
      if (base_version != version_) {
        return Status(ErrorCode::mismatch,
                      fmt::format("{}: worker {} pushed from version {} but bsp is at version {}",
                                  spec_.label(), worker, base_version, version_));
      }
      if (staged_[worker]) {
        return Status(ErrorCode::mismatch,
                      fmt::format("{}: worker {} already pushed for version {}", spec_.label(),
                                  worker, version_));
      }
      staged_[worker] = Bytes(data, data + bytes);
      ++w.pushes;
      ++w.applied;
      if (++staged_count_ < spec_.tensor.num_workers) break;
      // Every worker's gradient is here: sum in worker order, whatever the arrival order.
      sum_ = std::move(*staged_[0]);
      for (size_t i = 1; i < staged_.size(); ++i) {
        reduce_into(sum_.data(), staged_[i]->data(), spec_.count, spec_.tensor.dtype,
                    ReduceOp::sum);
      }
      if (spec_.tensor.aggregate == ReduceOp::avg) {
        scale_for_avg(sum_.data(), spec_.count, spec_.tensor.dtype,
                      static_cast<int>(spec_.tensor.num_workers));
      }
      apply(sum_.data());
      for (auto& s : staged_) s.reset();
      staged_count_ = 0;
      break;
    }
    case Mode::ssp:
      ++w.pushes;
      if (version_ - base_version > spec_.tensor.staleness) {
        ++w.rejected_stale;
        out.applied = false;
        break;
      }
      ++w.applied;
      apply(data);
      break;
    case Mode::async:
      ++w.pushes;
      ++w.applied;
      apply(data);
      break;
  }
  out.version = version_;
  out.rejected_stale = w.rejected_stale;
  changed_.notify_all();
  return out;
}

bool PartitionState::pull_ready(uint32_t worker, uint64_t min_version) const {
  if (version_ < min_version) return false;
  if (spec_.tensor.mode != Mode::ssp) return true;
  uint64_t slowest = workers_[0].pushes;
  for (const WorkerCounters& w : workers_) slowest = std::min(slowest, w.pushes);
  return workers_[worker].pushes - slowest <= spec_.tensor.staleness;
}

Result<PullSnapshot> PartitionState::pull(uint32_t worker, uint64_t min_version,
                                          Clock::time_point deadline,
                                          const std::function<bool()>& cancelled) {
  WEFT_RETURN_IF_ERROR(spec_.check_worker(worker));
  MutexUniqueLock lock(mu_);
  while (!pull_ready(worker, min_version)) {
    if (shut_down_) {
      return Status(ErrorCode::aborted, fmt::format("{}: the shard is shutting down",
                                                    spec_.label()));
    }
    if (cancelled && cancelled()) {
      return Status(ErrorCode::aborted,
                    fmt::format("{}: worker {} cancelled its pull", spec_.label(), worker));
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status(ErrorCode::timeout,
                    fmt::format("{}: worker {} waited for version {} (at {}{}) until its deadline",
                                spec_.label(), worker, min_version, version_,
                                spec_.tensor.mode == Mode::ssp ? ", or for slower workers" : ""));
    }
    changed_.wait_until(lock.native(), std::min(deadline, now + std::chrono::milliseconds(50)));
  }
  PullSnapshot snap;
  snap.version = version_;
  snap.data = weights_;
  return snap;
}

void PartitionState::shutdown() {
  MutexLock lock(mu_);
  shut_down_ = true;
  changed_.notify_all();
}

uint64_t PartitionState::version() const {
  MutexLock lock(mu_);
  return version_;
}

std::vector<WorkerCounters> PartitionState::counters() const {
  MutexLock lock(mu_);
  return workers_;
}

}  // namespace weft::ps
