// Internal classes of the shared-memory transport (contract in shm_transport.h, layout in
// segment.h), shared by its files: setup.cc, send_path.cc, recv_path.cc, shared_buffer.cc,
// waiting.cc and liveness.cc.
//
// Threads and locks: each Peer has one mutex guarding its matching state (a PeerQueues of the
// matching engine, transport/matching.h), its outbound queue and both rings shared with it; whoever makes progress (the operation's thread in wait(), the
// progress thread between operations, a poster) takes it, and copies into or out of a ring only
// while holding it, so fail() (which takes every peer mutex) returns only once no buffer is
// touched. Lock order: one Peer::mu (or all of them in rank order, as Matcher::post_any takes
// them), then the matcher's own mutex and err_mu_ (leaves). The annotations (base/thread_annotations.h) let clang check this.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/cpus.h"
#include "base/fd.h"
#include "base/mutex.h"
#include "transport/matching.h"
#include "transport/shm/segment.h"
#include "transport/shm/shm_transport.h"

namespace weft::shm {

// A waiter polls the rings for a while after the last progress before it sleeps on its doorbell.
// With a core per rank it polls long (1 ms): on a VM, waking a rank whose vCPU halted costs tens
// of microseconds, and a rank woken late makes its peer wait long enough to sleep too, so short
// spins turn into a chain of slow hand-offs. When ranks outnumber cores it yields the core after
// its first few dozen passes (the peer it waits for most likely waits for that core), then
// sleeps (docs/algorithms.md, "Progress rules", has the measurements).
inline constexpr auto kSpinAlone = std::chrono::milliseconds(1);
inline constexpr auto kSpinShared = std::chrono::microseconds(50);

inline constexpr size_t kMaxChunk = 256 << 10;  // largest DATA record

inline bool is_p2p(uint64_t tag) { return (tag & kP2pTagBit) != 0; }

inline void cpu_pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// The fingerprint of the collective running now: written by the thread running collectives
// (begin_operation), read by any thread that checks an arrival against it. A seqlock, so the
// writer (on the path of every collective) never takes a lock.
class CurrentFingerprint {
 public:
  void store(const Fingerprint& fp) {
    const uint32_t v = version_.load(std::memory_order_relaxed);
    version_.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    kind_.store(static_cast<uint8_t>(fp.kind), std::memory_order_relaxed);
    dtype_.store(static_cast<uint8_t>(fp.dtype), std::memory_order_relaxed);
    op_.store(static_cast<uint8_t>(fp.op), std::memory_order_relaxed);
    root_.store(fp.root, std::memory_order_relaxed);
    count_.store(fp.count, std::memory_order_relaxed);
    seq_.store(fp.seq, std::memory_order_relaxed);
    version_.store(v + 2, std::memory_order_release);
  }
  Fingerprint load() const {
    for (;;) {
      const uint32_t v = version_.load(std::memory_order_acquire);
      if ((v & 1) != 0) {
        cpu_pause();
        continue;
      }
      Fingerprint fp;
      fp.kind = static_cast<OpKind>(kind_.load(std::memory_order_relaxed));
      fp.dtype = static_cast<DataType>(dtype_.load(std::memory_order_relaxed));
      fp.op = static_cast<ReduceOp>(op_.load(std::memory_order_relaxed));
      fp.root = root_.load(std::memory_order_relaxed);
      fp.count = count_.load(std::memory_order_relaxed);
      fp.seq = seq_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (version_.load(std::memory_order_relaxed) == v) return fp;
    }
  }

 private:
  std::atomic<uint32_t> version_{0};
  std::atomic<uint8_t> kind_{static_cast<uint8_t>(OpKind::send)};
  std::atomic<uint8_t> dtype_{static_cast<uint8_t>(DataType::uint8)};
  std::atomic<uint8_t> op_{static_cast<uint8_t>(ReduceOp::sum)};
  std::atomic<int32_t> root_{-1};
  std::atomic<uint64_t> count_{0}, seq_{0};
};

// A message that arrived before its receive was posted (its tag, fingerprint and size are in the
// engine's Parked record).
struct Unexpected {
  RecordType type = RecordType::eager;  // eager (payload in `data`) or rts (payload waits)
  uint64_t msg_id = 0;      // rts
  uint8_t* data = nullptr;  // eager payload, from the pool
  uint64_t address = 0;     // rts: where the sender offers it to be read (0: not offered)
};
using ShmParked = Parked<Unexpected>;
using ShmMatcher = Matcher<Unexpected>;

// A record waiting for room in a peer's ring.
struct OutRec {
  RecordType type = RecordType::eager;
  Request* req = nullptr;  // eager, rts (header only), data
  uint64_t value = 0;      // cts: msg_id; credit: bytes
  size_t offset = 0;       // data: bytes already written
};

struct Peer {
  Peer(ShmMatcher& matcher, int index, int name_, size_t credits)
      : rank(index), name(name_), queues(matcher, name_), send_credits(credits) {}

  const int rank;  // index in this transport
  const int name;  // the rank messages call it (ShmTransportConfig::members)
  int pid = 0;
  Mutex mu;
  // Fixed once started; the rings' contents are mu's too (copies happen while holding it).
  std::unique_ptr<Segment> seg;  // the peer's segment (nullptr for this rank itself)
  SegmentHeader* hdr = nullptr;  // its header
  RingCtl* in_ctl = nullptr;     // ring peer -> this rank (in this rank's segment)
  uint8_t* in = nullptr;
  RingCtl* out_ctl = nullptr;    // ring this rank -> peer (in the peer's segment)
  uint8_t* out = nullptr;
  uint64_t in_head GUARDED_BY(mu) = 0;       // consumed
  uint64_t in_published GUARDED_BY(mu) = 0;  // last value stored to in_ctl->head
  std::atomic<uint64_t> consumed{0};  // in_head, for work_pending's lock-free look
  uint64_t out_tail GUARDED_BY(mu) = 0;  // produced (published to out_ctl->tail)
  // The consumer's head as last read (refreshed when short of room).
  uint64_t out_head GUARDED_BY(mu) = 0;
  std::deque<OutRec> outq GUARDED_BY(mu);
  // Receives posted for this peer and its arrivals that no receive took yet (Request::peer and
  // the queues' peer are names, as messages call ranks).
  PeerQueues<Unexpected> queues GUARDED_BY(mu);
  std::vector<Request*> rts_pending GUARDED_BY(mu);  // our large sends waiting for CTS
  std::vector<Request*> expected GUARDED_BY(mu);     // our receives waiting for DATA
  size_t send_credits GUARDED_BY(mu);
  size_t credits_to_return GUARDED_BY(mu) = 0;
  uint64_t next_msg_id GUARDED_BY(mu) = 0;
  std::atomic<bool> gone{false};       // the process exited (seen by the watcher)
  std::atomic<bool> silent{false};     // its heartbeat stood still for peer_timeout
  uint64_t hb_seen = 0;                // heartbeat()'s own state (its thread only)
  Clock::time_point hb_heard{};
  std::atomic<bool> want_room{false};  // our records wait for room in the peer's ring
  // Its offers may be read (false once the kernel refused).
  bool cma GUARDED_BY(mu) = true;
  SharedSlot* shared[2] = {};          // its two SharedSlots (this rank's own for itself)
};

class ShmTransport final : public Transport {
 public:
  ShmTransport(const ShmTransportConfig& config, BufferPool& pool)
      : rank_(config.rank),
        size_(config.size),
        options_(config.options),
        pool_(pool),
        ring_bytes_(config.options.shm_ring_bytes),
        eager_limit_(std::min(config.options.eager_threshold, ring_bytes_ / 4 - kRecordBytes)),
        max_chunk_(std::min(kMaxChunk, ring_bytes_ / 4)),
        cma_threshold_(config.options.shm_cma_threshold),
        oversubscribed_(std::max(config.size, config.machine_ranks) > usable_cpus()),
        caller_progress_(config.caller_progress) {
    names_ = config.members;
    if (names_.empty()) {
      for (int r = 0; r < size_; ++r) names_.push_back(r);
    }
    name_ = names_[static_cast<size_t>(rank_)];
    for (size_t i = 0; i < names_.size(); ++i) {
      const auto g = static_cast<size_t>(names_[i]);
      if (index_of_.size() <= g) index_of_.resize(g + 1, -1);
      index_of_[g] = static_cast<int>(i);
    }
  }
  ~ShmTransport() override;

  Status start(Store& store, uint64_t token);

  int rank() const override { return rank_; }
  // The index of the rank messages call `name`; -1 when it is not on this transport.
  int index_of(int name) const {
    return name >= 0 && static_cast<size_t>(name) < index_of_.size()
               ? index_of_[static_cast<size_t>(name)]
               : -1;
  }
  Status not_here(int name) const {
    return Status(ErrorCode::internal,
                  fmt::format("rank {}: rank {} is not reachable through shared memory", name_, name));
  }
  int size() const override { return size_; }
  void post_send(Request* r) override;
  void post_recv(Request* r) override;
  void begin_operation(const Fingerprint& fp) override;
  void end_operation() override;
  bool wait(Completion& completion, uint32_t seen, const Request* hint,
            Clock::time_point deadline) override;
  void fail(const Status& status) EXCLUDES(err_mu_) override;
  Status error() const override;
  void close(std::chrono::milliseconds timeout) override;
  Status heartbeat(Clock::time_point now, std::chrono::milliseconds peer_timeout) override;
  std::vector<int> lost_peers() const override;
  TransportCounters counters() const override {
    TransportCounters c;
    c.single_copy_messages = single_copy_messages_.load(std::memory_order_relaxed);
    c.single_copy_bytes = single_copy_bytes_.load(std::memory_order_relaxed);
    c.single_copy_refused = single_copy_refused_.load(std::memory_order_relaxed);
    c.cpu_moves = cpu_moves_.load(std::memory_order_relaxed);
    return c;
  }
  size_t shared_capacity() const override { return kSharedBytes; }
  Result<uint8_t*> shared_begin(const Fingerprint& fp, Clock::time_point deadline) override;
  void shared_publish(size_t bytes) override;
  Result<std::span<const uint8_t>> shared_read(int peer, Clock::time_point deadline) override;

 private:
  // Polls, then sleeps (like wait()), until ready() holds; ends with the transport's failure, an
  // error when `p` left before ready() held, or ErrorCode::timeout at `deadline`.
  template <typename Ready>
  Status wait_shared(Peer& p, Ready ready, Clock::time_point deadline);
  // A peer that runs the current collective through its SharedSlot while this rank exchanges
  // messages for it (the ranks disagree on the call): the mismatch; ok otherwise.
  Status shared_mismatch();
  // A parked message of a collective that disagrees with the current one; ok otherwise.
  // begin_operation checks parked messages only while the matcher counts some, and a message
  // checked on arrival against the operation before and parked while begin_operation read that
  // count is seen by neither: a waiter looks again before it sleeps (off the per-message path).
  Status parked_mismatch();
  // After shared_publish: rings the peers that sleep (at the latest when the operation ends).
  void wake_sleepers();
  // One pass over every peer; returns > 0 when anything moved (or a peer was busy elsewhere).
  int progress_all();
  Status progress_peer(Peer& p, int& moved) REQUIRES(p.mu);
  Status read_ring(Peer& p, int& moved) REQUIRES(p.mu);
  void publish_head(Peer& p) REQUIRES(p.mu);
  Status on_record(Peer& p, const Record& rec, const uint8_t* payload, int& moved) REQUIRES(p.mu);
  Status flush(Peer& p, int& moved) REQUIRES(p.mu);
  Status check_peer(Peer& p) REQUIRES(p.mu);
  Status check_collective(const Peer& p, uint64_t tag, const Fingerprint& fp);
  // Receives the large message msg_id into the matched receive r, reading it from the sender's
  // memory when it offered that (acknowledged with a `read` record), else asking for it through
  // the ring (CTS). An error fails the transport.
  Status receive_large(Peer& p, Request* r, uint64_t msg_id, uint64_t address, int& moved)
      REQUIRES(p.mu);
  // Copies r->bytes from `address` in p's process into r->buf. Sets `refused` (and returns ok)
  // when the kernel does not allow it: the caller falls back to the ring.
  Status cma_read(Peer& p, Request& r, uint64_t address, bool& refused) REQUIRES(p.mu);
  // Whether a send offers its buffer to be read by the receiver (rts record's offset).
  bool offers_read(const Request& r) const { return cma_threshold_ != 0 && r.bytes >= cma_threshold_; }
  Status match_check(const Peer& p, const Request& r, uint64_t bytes, const Fingerprint& remote);
  // Matches r with the parked message `a` of peer p (taken from p.queues). An error fails the
  // transport (the caller calls fail() once p.mu is released).
  Status match_unexpected(Peer& p, Request* r, ShmParked a) REQUIRES(p.mu);
  // Receives from any peer (Request::peer == kAnyPeer): Matcher::post_any.
  void post_recv_any(Request* r);
  void send_self(Request* r);
  void return_credits(Peer& p, size_t bytes) REQUIRES(p.mu);
  void complete(Request* r, Status st);
  void fail_locked_out(const Status& status);
  Status failure() const EXCLUDES(err_mu_);
  void background_loop() EXCLUDES(bg_mu_);
  // True when a pass over the peers would find something to do (lock-free look).
  bool work_pending() const;
  // Sleeps on this rank's doorbell unless work_pending() or `completion` moved past `seen`.
  void sleep_until_work(const Completion* completion, uint32_t seen, Clock::duration limit);
  // Sleeps on this rank's doorbell (at most `limit`) unless work_pending() or done().
  template <typename Done>
  void sleep_unless(Done done, Clock::duration limit);
  void watch_loop();
  void note_p2p() EXCLUDES(bg_mu_);
  // Oversubscribed waits: publishes this thread's CPU and, when the host's ranks crowd one CPU
  // while another has fewer than its share, moves this thread if it is the one to move.
  void spread_out(Clock::time_point now);

  const int rank_;
  const int size_;
  const Options options_;
  BufferPool& pool_;
  const size_t ring_bytes_;
  const size_t eager_limit_;
  const size_t max_chunk_;
  const size_t cma_threshold_;  // sends at least this large offer to be read in place (0: none)
  const bool oversubscribed_;  // more ranks on this host than usable CPUs: spin briefly, yield
  Clock::time_point next_spread_{};  // spread_out()'s next look (waiting threads only)
  std::vector<int> cpu_of_rank_;     // spread_out()'s view of where the ranks wait
  std::atomic<uint64_t> cpu_moves_{0};
  // False: the progress thread also serves operations and wait() just sleeps on the completion
  // (ShmTransportConfig::caller_progress).
  const bool caller_progress_;
  std::vector<int> names_;     // index -> the rank messages name (ShmTransportConfig::members)
  std::vector<int> index_of_;  // name -> index (-1: not on this transport)
  int name_ = 0;               // names_[rank_]
  std::unique_ptr<Segment> own_;
  // Receives from any peer and the counters over all peers' queues (parked collective
  // messages); declared before the peers, whose queues refer to it.
  ShmMatcher matcher_;
  std::vector<std::unique_ptr<Peer>> peers_;  // fixed once started_
  bool started_ = false;

  std::atomic<uint64_t> single_copy_messages_{0}, single_copy_bytes_{0}, single_copy_refused_{0};

  mutable Mutex err_mu_;  // a leaf (taken under a Peer::mu)
  Status error_ GUARDED_BY(err_mu_);
  std::atomic<bool> failed_{false};
  // fail_locked_out calls still completing requests they took from the queues (outside the
  // peer locks): fail() returns only once none is, so a caller may free its requests then.
  std::atomic<int> completing_{0};

  CurrentFingerprint current_;
  // Shared-buffer collectives (thread running collectives only): how many ran, the current one.
  uint64_t shared_call_ = 0;
  size_t shared_bytes_ = 0;  // what this rank published for shared_call_
  Fingerprint shared_fp_;
  bool wake_pending_ = false;  // published since the last wake_sleepers

  // The progress thread works only between operations and only once point-to-point was used
  // (collectives are progressed by the thread that runs them, from wait()).
  Mutex bg_mu_;  // a leaf
  std::condition_variable bg_cv_;
  bool stopping_ GUARDED_BY(bg_mu_) = false;
  std::atomic<bool> op_active_{false};
  std::atomic<bool> p2p_used_{false};
  // Started by start(); the destructor stops and joins them.
  std::jthread background_;
  std::jthread watcher_;
  Fd watch_wake_;
};

// Here, not in a .cc: sleep_until_work (waiting.cc) and wait_shared (shared_buffer.cc) use it.
template <typename Done>
void ShmTransport::sleep_unless(Done done, Clock::duration limit) {
  // Announce the sleep, then look once more: a producer publishes its record (or slot) before it
  // checks for sleepers (nudge, wake_sleepers), so either it sees this sleeper and rings, or this
  // look sees what it published.
  SegmentHeader& own = own_->header();
  own.sleepers.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t bell = own.doorbell.load(std::memory_order_seq_cst);
  if (!work_pending() && !done()) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
    futex_wait(own, bell, ns);
  }
  own.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace weft::shm
