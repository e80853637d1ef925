// CommMetrics: what one communicator counts for Prometheus (docs/observability.md), and the plain
// snapshot of it that the exposition reads.
//
// Cost: the counters sit on the path of every operation (an 8-byte allreduce on one rank takes
// about 80 ns), so they are single-writer: an add is a relaxed load and store, no locked
// instruction. That is race-free because each group has one writer at a time: collectives run one
// after the other (the communicator hands `running_` from one executing thread to the next with
// a release/acquire pair), point-to-point posts are counted under the communicator's mu_. Rare
// events (errors, shrink, grow) use fetch_add. Readers (a scrape, Communicator::metrics) load
// with relaxed order from any thread: a scrape may see an operation's count without its bytes,
// never a torn value.
//
// Durations come from the times the operation is stamped with anyway (the flight recorder's): a
// blocking call that runs inline on the caller is stamped with the coarse clock (base/clock.h,
// 1-4 ms ticks), so its duration is a whole number of ticks whose mean is the true mean; calls
// that wait in the queue (async, and blocking calls behind them) are timed precisely.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <string>

#include "transport/transport.h"
#include "weft/options.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft {

// A counter with one writer at a time (see above).
class SingleWriterCounter {
 public:
  void add(uint64_t n) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// Upper bounds of the duration histogram: 2^(10+2i) ns, i.e. 1.024 us, 4.1 us, ... 17.2 s, then
// +Inf. Powers of four keep the bucket a shift and a bit count away from the duration.
inline constexpr int kDurationBuckets = 14;  // 13 finite bounds and +Inf
inline constexpr double duration_bucket_bound(int i) { return double(uint64_t{1} << (10 + 2 * i)) * 1e-9; }
inline int duration_bucket(uint64_t ns) {
  if (ns <= 1024) return 0;
  const int bits = std::bit_width(ns - 1);  // ns <= 2^bits
  const int i = (bits - 9) / 2;             // smallest i with 10 + 2i >= bits
  return i < kDurationBuckets - 1 ? i : kDurationBuckets - 1;
}

inline constexpr int kErrorCodeCount = static_cast<int>(kMaxErrorCode) + 1;

struct CommMetrics {
  struct Collective {
    std::array<SingleWriterCounter, kAlgorithmCount> calls;  // by the algorithm that ran
    SingleWriterCounter bytes;                               // payload_bytes of each call
    SingleWriterCounter duration_ns;
    std::array<SingleWriterCounter, kDurationBuckets> buckets;  // not cumulative
  };
  std::array<Collective, kOpKindCount> collectives;
  // Point-to-point posts, [0] send and [1] recv (counted under the communicator's mu_).
  std::array<SingleWriterCounter, 2> p2p_calls;
  std::array<SingleWriterCounter, 2> p2p_bytes;
  // Operations that ended with an error, by code, where the communicator sees them: collectives
  // when they end, point-to-point posts refused or past their deadline.
  std::array<std::atomic<uint64_t>, kErrorCodeCount> errors{};
  std::atomic<uint64_t> revokes{0};
  std::atomic<uint64_t> shrinks{0};
  std::atomic<uint64_t> grows{0};

  void count_collective(OpKind kind, Algorithm algorithm, size_t bytes, uint64_t ns) {
    Collective& c = collectives[static_cast<size_t>(kind)];
    c.calls[static_cast<size_t>(algorithm)].add(1);
    c.bytes.add(bytes);
    c.duration_ns.add(ns);
    c.buckets[static_cast<size_t>(duration_bucket(ns))].add(1);
  }
  void count_p2p(OpKind kind, size_t bytes) {
    const size_t i = kind == OpKind::send ? 0 : 1;
    p2p_calls[i].add(1);
    p2p_bytes[i].add(bytes);
  }
  void count_error(ErrorCode code) {
    const auto i = static_cast<size_t>(code);
    if (i < errors.size()) errors[i].fetch_add(1, std::memory_order_relaxed);
  }
};

// What a scrape reads of one communicator: its identity, its counters and its transport's.
struct MetricsSnapshot {
  uint64_t token = 0;  // the communicator's id (label comm, in hex)
  int rank = 0;
  int size = 0;
  std::string transport;  // how this rank reaches its peers ("tcp", "shm", "mixed (...)")
  bool has_shm = false;   // shared memory carries some of its traffic
  bool broken = false;
  size_t lost_peers = 0;  // peers the transport declared lost (heartbeats, closed links)
  const CommMetrics* counters = nullptr;  // read while the communicator is registered
  TransportCounters transport_counters;
};

}  // namespace weft
