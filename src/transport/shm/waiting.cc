// Waiting in the shared-memory transport: polling the rings, then sleeping on this rank's doorbell
// (complete() rings it), the progress thread, and spreading ranks that outnumber the CPUs.
#include <sched.h>

#include <algorithm>
#include <span>
#include <thread>
#include <vector>

#include "transport/shm/shm_transport_impl.h"

namespace weft {

int spread_target(int rank, std::span<const int> cpu_of_rank, const cpu_set_t& allowed) {
  const int ranks = static_cast<int>(cpu_of_rank.size());
  const int cpus = CPU_COUNT(&allowed);
  if (rank < 0 || rank >= ranks || cpus < 2) return -1;
  const int mine = cpu_of_rank[static_cast<size_t>(rank)];
  std::vector<int> per_cpu(CPU_SETSIZE, 0);
  for (int r = 0; r < ranks; ++r) {
    const int cpu = cpu_of_rank[static_cast<size_t>(r)];
    if (cpu < 0 || cpu >= CPU_SETSIZE) return -1;  // not every rank has waited yet
    ++per_cpu[static_cast<size_t>(cpu)];
    if (cpu == mine && r > rank) return -1;  // the highest rank on a CPU moves: one at a time
  }
  if (!CPU_ISSET(mine, &allowed) || per_cpu[static_cast<size_t>(mine)] <= (ranks + cpus - 1) / cpus) {
    return -1;
  }
  int target = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || per_cpu[static_cast<size_t>(cpu)] >= ranks / cpus) continue;
    if (target < 0 || per_cpu[static_cast<size_t>(cpu)] < per_cpu[static_cast<size_t>(target)]) {
      target = cpu;
    }
  }
  return target;
}

namespace shm {
namespace {

// The progress thread serving an operation (caller_progress off) keeps looking this long after
// the last thing moved.
constexpr auto kServeSpin = std::chrono::milliseconds(1);

// Waiting ranks that outnumber the CPUs look this often at which CPU each rank of the host last
// waited on (SegmentHeader::cpu), and the highest rank on a CPU that holds more than its share
// moves itself to one that holds less (spread_out).
constexpr auto kSpreadEvery = std::chrono::milliseconds(2);

}  // namespace

bool ShmTransport::work_pending() const {
  if (failed_.load(std::memory_order_acquire)) return true;
  for (const auto& peer : peers_) {
    const Peer& p = *peer;
    if (p.hdr == nullptr) continue;
    if (p.in_ctl->tail.load(std::memory_order_acquire) != p.consumed.load(std::memory_order_relaxed) ||
        p.in_ctl->producer_waiting.load(std::memory_order_acquire) != 0) {
      return true;
    }
    if (p.hdr->state.load(std::memory_order_acquire) != kRunning || p.gone.load()) return true;
    // The consumer cleared our request for room: there is some.
    if (p.want_room.load(std::memory_order_acquire) &&
        p.out_ctl->producer_waiting.load(std::memory_order_acquire) == 0) {
      return true;
    }
  }
  return false;
}

void ShmTransport::sleep_until_work(const Completion* completion, uint32_t seen,
                                    Clock::duration limit) {
  sleep_unless([&] { return completion != nullptr && completion->generation() != seen; }, limit);
}

bool ShmTransport::wait(Completion& completion, uint32_t seen, const Request* hint,
                        Clock::time_point deadline) {
  (void)hint;
  if (!caller_progress_) {
    // The progress thread serves this transport; with a core per rank, passes of the caller's
    // own for a short while save it a wake-up for a reply that comes at once. With more ranks
    // than cores they only take the core from the rank that must answer (docs/algorithms.md,
    // "Progress rules"). Returns false after them (the caller then sleeps elsewhere).
    if (oversubscribed_) return completion.generation() != seen;
    const auto until = std::min(deadline, Clock::now() + kSpinShared);
    while (true) {
      if (completion.generation() != seen) return true;
      if (progress_all() > 0) continue;
      if (completion.generation() != seen) return true;
      if (Clock::now() >= until) return false;
      cpu_pause();
    }
  }
  auto idle_since = Clock::now();
  int idle_passes = 0;
  while (true) {
    if (completion.generation() != seen) return true;
    const int moved = progress_all();
    if (completion.generation() != seen) return true;
    if (moved > 0) {
      idle_passes = 0;
      continue;
    }
    if (failed_.load(std::memory_order_acquire)) return completion.wait_for_change(seen, deadline);
    // Reading the clock costs as much as a pass over the rings: look at it every few passes.
    if (idle_passes++ % 32 != 0) {
      cpu_pause();
      continue;
    }
    const auto now = Clock::now();
    if (idle_passes == 1) idle_since = now;
    if (now >= deadline) return false;
    if (Status st = shared_mismatch(); !st.ok()) {
      fail(st);
      continue;
    }
    const auto idle = now - idle_since;
    if (!oversubscribed_ && idle < kSpinAlone) continue;
    if (oversubscribed_ && idle < kSpinShared) {
      spread_out(now);
      std::this_thread::yield();
      continue;
    }
    if (Status st = parked_mismatch(); !st.ok()) {
      fail(st);
      continue;
    }
    sleep_until_work(&completion, seen,
                     std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100)));
    idle_passes = 0;
  }
}

void ShmTransport::complete(Request* r, Status st) {
  r->complete(std::move(st));
  // A waiter sleeping on this rank's doorbell must see a completion made by another thread.
  SegmentHeader& h = own_->header();
  if (h.sleepers.load(std::memory_order_seq_cst) != 0) ring(h);
}

void ShmTransport::spread_out(Clock::time_point now) {
  if (now < next_spread_) return;
  next_spread_ = now + kSpreadEvery;
  const int mine = ::sched_getcpu();
  if (mine < 0 || mine >= CPU_SETSIZE) return;
  own_->header().cpu.store(mine, std::memory_order_relaxed);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  cpu_of_rank_.resize(peers_.size());
  for (const auto& p : peers_) {
    cpu_of_rank_[static_cast<size_t>(p->rank)] =
        p->rank == rank_ ? mine : p->hdr->cpu.load(std::memory_order_relaxed);
  }
  const int target = spread_target(rank_, cpu_of_rank_, allowed);
  if (target < 0) return;
  // Pinning moves this thread at once; the old mask back leaves it there, free to move again.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(target, &one);
  if (::sched_setaffinity(0, sizeof(one), &one) != 0) return;
  own_->header().cpu.store(target, std::memory_order_relaxed);
  cpu_moves_.fetch_add(1, std::memory_order_relaxed);
  ::sched_setaffinity(0, sizeof(allowed), &allowed);
}

void ShmTransport::background_loop() {
  Clock::time_point last_moved{};
  while (true) {
    {
      MutexUniqueLock lock(bg_mu_);
      bg_cv_.wait(lock.native(), [&]() REQUIRES(bg_mu_) {
        return stopping_ ||
               (!failed_.load() && (!caller_progress_ || (p2p_used_.load() && !op_active_.load())));
      });
      if (stopping_) return;
    }
    if (progress_all() > 0) {
      if (!caller_progress_) last_moved = Clock::now();
      continue;
    }
    if (caller_progress_ && op_active_.load(std::memory_order_acquire)) continue;
    // Serving an operation (caller_progress off): what comes next usually follows within
    // microseconds, and a wake-up from the doorbell costs milliseconds on a crowded machine, so
    // keep looking (yielding the core) while the operation still moves.
    if (!caller_progress_ && op_active_.load(std::memory_order_acquire) &&
        Clock::now() - last_moved < kServeSpin) {
      std::this_thread::yield();
      continue;
    }
    if (op_active_.load(std::memory_order_acquire)) {
      if (Status st = parked_mismatch(); !st.ok()) {
        fail(st);
        continue;
      }
    }
    sleep_until_work(nullptr, 0, std::chrono::milliseconds(100));
  }
}

}  // namespace shm
}  // namespace weft
