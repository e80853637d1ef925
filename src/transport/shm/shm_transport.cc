// The shared-memory transport (contract in shm_transport.h, layout in segment.h).
//
// Threads and locks: each Peer has one mutex guarding its matching state, its outbound queue and
// both rings shared with it; whoever makes progress (the operation's thread in wait(), the
// progress thread between operations, a poster) takes it, and copies into or out of a ring only
// while holding it, so fail() (which takes every peer mutex) returns only once no buffer is
// touched. Lock order: one Peer::mu (or all of them in rank order), then any_mu_ (leaf
// locks, like err_mu_).
#include "transport/shm/shm_transport.h"

#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "rendezvous/store_common.h"
#include "runtime/buffer_pool.h"
#include "transport/shm/segment.h"

namespace weft {
namespace shm {
namespace {

using Clock = std::chrono::steady_clock;

// A waiter polls the rings for a while after the last progress before it sleeps on its doorbell.
// With a core per rank it polls long (1 ms): on a VM, waking a rank whose vCPU halted costs tens
// of microseconds, and a rank woken late makes its peer wait long enough to sleep too, so short
// spins turn into a chain of slow hand-offs. When ranks outnumber cores it yields the core after
// its first few dozen passes (the peer it waits for most likely waits for that core), then
// sleeps. Polling 5 us before the first yield made an 8-byte-4-KiB allreduce of 4 ranks on 2
// cores 1.3-1.9x slower (medians of 8 interleaved runs: 27.5 against 20.4 us at 8 bytes, 14.9
// against 10.0 us at 512 bytes).
constexpr auto kSpinAlone = std::chrono::milliseconds(1);
constexpr auto kSpinShared = std::chrono::microseconds(50);
// The progress thread serving an operation (caller_progress off) keeps looking this long after
// the last thing moved.
constexpr auto kServeSpin = std::chrono::milliseconds(1);

// Waiting ranks that outnumber the CPUs look this often at which CPU each rank of the host last
// waited on (SegmentHeader::cpu), and the highest rank on a CPU that holds more than its share
// moves itself to one that holds less (spread_out).
constexpr auto kSpreadEvery = std::chrono::milliseconds(2);

}  // namespace
}  // namespace shm

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

// CPUs this process may run on.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}
constexpr size_t kMaxChunk = 256 << 10;  // largest DATA record
constexpr size_t kCmaPiece = 1 << 20;    // largest process_vm_readv of a message read in place
constexpr size_t kMinChunk = 4096;       // smaller pieces wait for room instead

bool is_p2p(uint64_t tag) { return (tag & kP2pTagBit) != 0; }

void cpu_pause() {
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

// The fingerprint a DirectSlot carries (written by another process: enum values unchecked).
Fingerprint slot_fingerprint(const DirectSlot& s) {
  Fingerprint fp;
  fp.seq = s.seq.load(std::memory_order_relaxed);
  fp.count = s.count.load(std::memory_order_relaxed);
  fp.kind = static_cast<OpKind>(s.kind.load(std::memory_order_relaxed));
  fp.dtype = static_cast<DataType>(s.dtype.load(std::memory_order_relaxed));
  fp.op = static_cast<ReduceOp>(s.op.load(std::memory_order_relaxed));
  fp.root = s.root.load(std::memory_order_relaxed);
  return fp;
}

// A message that arrived before its receive was posted.
struct Unexpected {
  RecordType type = RecordType::eager;  // eager (payload in `data`) or rts (payload waits)
  uint64_t tag = 0;
  Fingerprint fp;
  size_t bytes = 0;
  uint64_t msg_id = 0;      // rts
  uint8_t* data = nullptr;  // eager payload, from the pool
  uint64_t address = 0;     // rts: where the sender offers it to be read (0: not offered)
};

// A record waiting for room in a peer's ring.
struct OutRec {
  RecordType type = RecordType::eager;
  Request* req = nullptr;  // eager, rts (header only), data
  uint64_t value = 0;      // cts: msg_id; credit: bytes
  size_t offset = 0;       // data: bytes already written
};

struct Peer {
  int rank = -1;  // index in this transport
  int name = -1;  // the rank messages call it (ShmTransportConfig::members)
  int pid = 0;
  std::mutex mu;
  std::unique_ptr<Segment> seg;  // the peer's segment (nullptr for this rank itself)
  SegmentHeader* hdr = nullptr;  // its header
  RingCtl* in_ctl = nullptr;     // ring peer -> this rank (in this rank's segment)
  uint8_t* in = nullptr;
  RingCtl* out_ctl = nullptr;    // ring this rank -> peer (in the peer's segment)
  uint8_t* out = nullptr;
  uint64_t in_head = 0;          // consumed
  uint64_t in_published = 0;     // last value stored to in_ctl->head
  std::atomic<uint64_t> consumed{0};  // in_head, for work_pending's lock-free look
  uint64_t out_tail = 0;         // produced (published to out_ctl->tail)
  uint64_t out_head = 0;         // the consumer's head as last read (refreshed when short of room)
  std::deque<OutRec> outq;
  std::vector<Request*> posted;        // receives not yet matched, in posting order
  std::vector<Unexpected> unexpected;  // arrivals not yet matched, in arrival order
  std::vector<Request*> rts_pending;   // our large sends waiting for CTS
  std::vector<Request*> expected;      // our receives waiting for DATA
  size_t send_credits = 0;
  size_t credits_to_return = 0;
  uint64_t next_msg_id = 0;
  std::atomic<bool> gone{false};       // the process exited (seen by the watcher)
  std::atomic<bool> silent{false};     // its heartbeat stood still for peer_timeout
  uint64_t hb_seen = 0;                // heartbeat()'s own state (its thread only)
  Clock::time_point hb_heard{};
  std::atomic<bool> want_room{false};  // our records wait for room in the peer's ring
  bool cma = true;                     // its offers may be read (false once the kernel refused)
  DirectSlot* direct[2] = {};          // its two DirectSlots (this rank's own for itself)
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
  void fail(const Status& status) override;
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
  size_t shared_capacity() const override { return kDirectBytes; }
  Result<uint8_t*> shared_begin(const Fingerprint& fp, Clock::time_point deadline) override;
  void shared_publish(size_t bytes) override;
  Result<std::span<const uint8_t>> shared_read(int peer, Clock::time_point deadline) override;

 private:
  // Polls, then sleeps (like wait()), until ready() holds; ends with the transport's failure, an
  // error when `p` left before ready() held, or ErrorCode::timeout at `deadline`.
  template <typename Ready>
  Status wait_shared(Peer& p, Ready ready, Clock::time_point deadline);
  // A peer that runs the current collective through its DirectSlot while this rank exchanges
  // messages for it (the ranks disagree on the call): the mismatch; ok otherwise.
  Status direct_mismatch();
  // After shared_publish: rings the peers that sleep (at the latest when the operation ends).
  void wake_sleepers();
  // One pass over every peer; returns > 0 when anything moved (or a peer was busy elsewhere).
  int progress_all();
  Status progress_peer(Peer& p, int& moved);         // p.mu held
  Status read_ring(Peer& p, int& moved);             // p.mu held
  void publish_head(Peer& p);                        // p.mu held
  Status on_record(Peer& p, const Record& rec, const uint8_t* payload, int& moved);
  Status flush(Peer& p, int& moved);                 // p.mu held
  Status check_peer(Peer& p);                        // p.mu held
  Status check_collective(const Peer& p, uint64_t tag, const Fingerprint& fp);
  // p.mu held: receives the large message msg_id into the matched receive r, reading it from
  // the sender's memory when it offered that (acknowledged with a `read` record), else asking
  // for it through the ring (CTS). An error fails the transport.
  Status receive_large(Peer& p, Request* r, uint64_t msg_id, uint64_t address, int& moved);
  // Copies r->bytes from `address` in p's process into r->buf. Sets `refused` (and returns ok)
  // when the kernel does not allow it: the caller falls back to the ring.
  Status cma_read(Peer& p, Request& r, uint64_t address, bool& refused);
  // Whether a send offers its buffer to be read by the receiver (rts record's offset).
  bool offers_read(const Request& r) const { return cma_threshold_ != 0 && r.bytes >= cma_threshold_; }
  Status match_check(const Peer& p, const Request& r, uint64_t bytes, const Fingerprint& remote);
  // p.mu held: the oldest receive posted for (p, tag), from p or from any peer; nullptr if none.
  Request* take_posted(Peer& p, uint64_t tag);
  // p.mu held: matches r with the parked message at `index` (removing it). An error fails the
  // transport (the caller calls fail() once p.mu is released).
  Status match_unexpected(Peer& p, Request* r, size_t index);
  // p.mu held: parks an arrival (counted in parked_collective_ when it belongs to a collective).
  void park(Peer& p, const Unexpected& u);
  void post_recv_any(Request* r);
  void send_self(Request* r);
  void return_credits(Peer& p, size_t bytes);
  void complete(Request* r, Status st);
  void fail_locked_out(const Status& status);
  Status failure() const;
  void background_loop();
  // True when a pass over the peers would find something to do (lock-free look).
  bool work_pending() const;
  // Sleeps on this rank's doorbell unless work_pending() or `completion` moved past `seen`.
  void sleep_until_work(const Completion* completion, uint32_t seen, Clock::duration limit);
  // Sleeps on this rank's doorbell (at most `limit`) unless work_pending() or done().
  template <typename Done>
  void sleep_unless(Done done, Clock::duration limit);
  void watch_loop();
  void note_p2p();
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
  std::vector<std::unique_ptr<Peer>> peers_;  // fixed once started_
  bool started_ = false;

  std::atomic<uint64_t> single_copy_messages_{0}, single_copy_bytes_{0}, single_copy_refused_{0};

  mutable std::mutex err_mu_;
  Status error_;
  std::atomic<bool> failed_{false};

  CurrentFingerprint current_;
  // Shared-buffer collectives (thread running collectives only): how many ran, the current one.
  uint64_t direct_call_ = 0;
  size_t direct_bytes_ = 0;  // what this rank published for direct_call_
  Fingerprint direct_fp_;
  bool wake_pending_ = false;  // published since the last wake_sleepers
  std::atomic<int> parked_collective_{0};  // parked messages of collectives, all peers

  std::mutex any_mu_;
  std::vector<Request*> any_posted_;

  // The progress thread works only between operations and only once point-to-point was used
  // (collectives are progressed by the thread that runs them, from wait()).
  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool stopping_ = false;                // bg_mu_
  std::atomic<bool> op_active_{false};
  std::atomic<bool> p2p_used_{false};
  std::thread background_;
  std::thread watcher_;
  Fd watch_wake_;
};

// ---- set-up and teardown ------------------------------------------------------------------------

Status ShmTransport::start(Store& store, uint64_t token) {
  remove_stale_segments();
  const std::string name = fmt::format("/weft-{:016x}-{}-{}", token, rank_, ::getpid());
  auto own = Segment::create(name, rank_, size_, token, ring_bytes_);
  if (!own.ok()) return own.status();
  own_ = std::move(own.value());
  // Our DirectSlots: written through our mapping once now, as the rings below.
  std::memset(static_cast<void*>(&own_->direct(0)), 0, 2 * kDirectSlotBytes);
  WEFT_RETURN_IF_ERROR(store.set(fmt::format("shm/seg/{}", rank_), name));
  // Every peer's segment name, in one request to the store.
  std::vector<int> others;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) others.push_back(r);
  }
  auto seg_names = gather_records(
      store, others, [](int r) { return fmt::format("shm/seg/{}", r); }, options_.connect_timeout);
  if (!seg_names.ok()) {
    return seg_names.status().with_context(
        fmt::format("rank {}: waiting for the shared-memory segments", name_));
  }
  // Built aside and kept only once complete: a failed start leaves no half-made peers.
  std::vector<std::unique_ptr<Peer>> peers(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->name = names_[static_cast<size_t>(r)];
    p->send_credits = options_.eager_credit_bytes;
    if (r != rank_) {
      const std::string& peer_name = seg_names.value()[static_cast<size_t>(r < rank_ ? r : r - 1)];
      auto seg = Segment::open(peer_name, r, size_, token, ring_bytes_);
      if (!seg.ok()) return seg.status().with_context(fmt::format("rank {}", name_));
      p->seg = std::move(seg.value());
      p->hdr = &p->seg->header();
      p->pid = p->hdr->pid;
      p->in_ctl = &own_->ctl(r);
      p->in = own_->ring(r);
      p->out_ctl = &p->seg->ctl(rank_);
      p->out = p->seg->ring(rank_);
      // Write our ring's pages through our own mapping once now (nobody reads it before its
      // first record): a first write to a shared page costs a fault in each process that maps it.
      std::memset(p->out, 0, ring_bytes_);
      // And map the peer's DirectSlots now: the first read of each page faults too.
      for (int parity = 0; parity < 2; ++parity) {
        p->direct[parity] = &p->seg->direct(parity);
        const volatile uint8_t* page = reinterpret_cast<const uint8_t*>(p->direct[parity]);
        for (size_t off = 0; off < kDirectSlotBytes; off += kPage) (void)page[off];
      }
    } else {
      for (int parity = 0; parity < 2; ++parity) p->direct[parity] = &own_->direct(parity);
    }
    peers[static_cast<size_t>(r)] = std::move(p);
  }
  // Every rank has mapped every segment once all are ready: the names can go.
  WEFT_RETURN_IF_ERROR(store.set(fmt::format("shm/ready/{}", rank_), "1"));
  auto ready = gather_records(
      store, others, [](int r) { return fmt::format("shm/ready/{}", r); }, options_.connect_timeout);
  if (!ready.ok()) {
    return ready.status().with_context(
        fmt::format("rank {}: waiting for the other ranks to map the shared-memory segments", name_));
  }
  own_->unlink();
  peers_ = std::move(peers);
  started_ = true;
  background_ = std::thread([this] { background_loop(); });
  bool watch = false;
  for (auto& p : peers_) watch = watch || (p->rank != rank_ && p->pid != ::getpid());
  if (watch) {
    watch_wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    watcher_ = std::thread([this] { watch_loop(); });
  }
  return Status();
}

ShmTransport::~ShmTransport() {
  if (!started_) return;  // set-up failed: the members only unmap (and unlink our name)
  if (own_->header().state.load() == kRunning) {
    own_->header().state.store(kDeparted, std::memory_order_release);
    for (auto& p : peers_) {
      if (p->hdr != nullptr) ring(*p->hdr);
    }
  }
  {
    std::lock_guard<std::mutex> lock(bg_mu_);
    stopping_ = true;
  }
  bg_cv_.notify_all();
  ring(own_->header());
  if (background_.joinable()) background_.join();
  if (watcher_.joinable()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(watch_wake_.get(), &one, sizeof(one));
    watcher_.join();
  }
  if (!failed_.load()) fail(Status(ErrorCode::aborted, fmt::format("rank {}: transport closed", name_)));
  for (auto& p : peers_) {
    for (Unexpected& u : p->unexpected) pool_.release(u.data, u.bytes);
  }
}

void ShmTransport::close(std::chrono::milliseconds timeout) {
  if (!own_) return;
  // What this rank wrote stays readable in the peers' segments after it leaves, but records still
  // queued here would be lost: a `read` acknowledgement queued when a single-copy receive
  // completed is what the sender's send waits for. Write them first (a full ring makes this wait
  // for its reader, at most `timeout`).
  const auto deadline = Clock::now() + timeout;
  for (auto& peer : peers_) {
    Peer& p = *peer;
    if (p.rank == rank_) continue;
    while (!failed_.load(std::memory_order_acquire)) {
      int moved = 0;
      std::unique_lock<std::mutex> lock(p.mu);
      if (p.outq.empty()) break;
      if (Status st = flush(p, moved); !st.ok()) {
        lock.unlock();
        fail(st);
        break;
      }
      if (p.outq.empty() || !check_peer(p).ok() || Clock::now() >= deadline) break;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  uint32_t expected = kRunning;
  own_->header().state.compare_exchange_strong(expected, kDeparted, std::memory_order_acq_rel);
  for (auto& p : peers_) {
    if (p->hdr != nullptr) ring(*p->hdr);
  }
}

// ---- posting --------------------------------------------------------------------------------------

void ShmTransport::complete(Request* r, Status st) {
  r->complete(std::move(st));
  // A waiter sleeping on this rank's doorbell must see a completion made by another thread.
  SegmentHeader& h = own_->header();
  if (h.sleepers.load(std::memory_order_seq_cst) != 0) ring(h);
}

void ShmTransport::note_p2p() {
  if (p2p_used_.exchange(true, std::memory_order_acq_rel)) return;
  std::lock_guard<std::mutex> lock(bg_mu_);
  bg_cv_.notify_all();
}

void ShmTransport::post_send(Request* r) {
  if (is_p2p(r->tag)) note_p2p();
  const int index = index_of(r->peer);
  if (index < 0) return r->complete(not_here(r->peer));
  if (index == rank_) return send_self(r);
  Peer& p = *peers_[static_cast<size_t>(index)];
  Status st;
  int moved = 0;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (failed_.load(std::memory_order_acquire)) {
      r->complete(failure());
      return;
    }
    if (r->bytes == 0 || (r->bytes <= eager_limit_ && r->bytes <= p.send_credits)) {
      p.send_credits -= r->bytes;
      p.outq.push_back(OutRec{RecordType::eager, r});
    } else {
      r->msg_id = ++p.next_msg_id;
      p.rts_pending.push_back(r);
      p.outq.push_back(OutRec{RecordType::rts, r});
    }
    st = flush(p, moved);
  }
  if (!st.ok()) fail(st);
}

void ShmTransport::send_self(Request* r) {
  Peer& p = *peers_[static_cast<size_t>(rank_)];
  Status st;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (failed_.load(std::memory_order_acquire)) {
      r->complete(failure());
      return;
    }
    Request* recv = take_posted(p, r->tag);
    if (recv != nullptr) {
      st = match_check(p, *recv, r->bytes, r->fp);
      if (st.ok() && r->bytes > 0) std::memcpy(recv->buf, r->buf, r->bytes);
      complete(recv, st);
    } else {
      Unexpected u{RecordType::eager, r->tag, r->fp, r->bytes, 0, nullptr};
      if (r->bytes > 0) {
        u.data = static_cast<uint8_t*>(pool_.acquire(r->bytes));
        std::memcpy(u.data, r->buf, r->bytes);
      }
      park(p, u);
    }
  }
  complete(r, Status());
}

void ShmTransport::post_recv(Request* r) {
  if (is_p2p(r->tag)) note_p2p();
  if (r->peer == kAnyPeer) return post_recv_any(r);
  const int index = index_of(r->peer);
  if (index < 0) return r->complete(not_here(r->peer));
  Peer& p = *peers_[static_cast<size_t>(index)];
  Status st;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (failed_.load(std::memory_order_acquire)) {
      r->complete(failure());
      return;
    }
    auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                           [&](const Unexpected& u) { return u.tag == r->tag; });
    if (it == p.unexpected.end()) {
      p.posted.push_back(r);
    } else {
      st = match_unexpected(p, r, static_cast<size_t>(it - p.unexpected.begin()));
      int moved = 0;
      if (st.ok()) st = flush(p, moved);  // a CTS, an acknowledged read or credits
    }
  }
  if (!st.ok()) fail(st);
}

void ShmTransport::post_recv_any(Request* r) {
  // Every peer mutex at once (in rank order): no arrival can slip between the search and the
  // parking of the receive.
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(peers_.size());
  for (auto& p : peers_) locks.emplace_back(p->mu);
  if (failed_.load(std::memory_order_acquire)) {
    r->complete(failure());
    return;
  }
  for (auto& peer : peers_) {
    Peer& p = *peer;
    auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                           [&](const Unexpected& u) { return u.tag == r->tag; });
    if (it == p.unexpected.end()) continue;
    r->peer = p.name;
    Status st = match_unexpected(p, r, static_cast<size_t>(it - p.unexpected.begin()));
    int moved = 0;
    if (st.ok()) st = flush(p, moved);
    locks.clear();
    if (!st.ok()) fail(st);
    return;
  }
  std::lock_guard<std::mutex> lock(any_mu_);
  any_posted_.push_back(r);
}

Request* ShmTransport::take_posted(Peer& p, uint64_t tag) {
  auto it = std::find_if(p.posted.begin(), p.posted.end(), [&](Request* r) { return r->tag == tag; });
  if (it != p.posted.end()) {
    Request* r = *it;
    p.posted.erase(it);
    return r;
  }
  if (!is_p2p(tag)) return nullptr;
  std::lock_guard<std::mutex> lock(any_mu_);
  auto any = std::find_if(any_posted_.begin(), any_posted_.end(),
                          [&](Request* r) { return r->tag == tag; });
  if (any == any_posted_.end()) return nullptr;
  Request* r = *any;
  any_posted_.erase(any);
  r->peer = p.name;
  return r;
}

void ShmTransport::park(Peer& p, const Unexpected& u) {
  p.unexpected.push_back(u);
  if (!is_p2p(u.tag)) parked_collective_.fetch_add(1, std::memory_order_acq_rel);
}

Status ShmTransport::match_unexpected(Peer& p, Request* r, size_t index) {
  Unexpected u = p.unexpected[index];
  p.unexpected.erase(p.unexpected.begin() + static_cast<std::ptrdiff_t>(index));
  if (!is_p2p(u.tag)) parked_collective_.fetch_sub(1, std::memory_order_acq_rel);
  Status st = match_check(p, *r, u.bytes, u.fp);
  if (u.type == RecordType::eager) {
    if (st.ok() && u.bytes > 0) std::memcpy(r->buf, u.data, u.bytes);
    pool_.release(u.data, u.bytes);
    if (p.rank != rank_) return_credits(p, u.bytes);
    complete(r, st);
    return Status();
  }
  if (!st.ok()) {
    // The sender's large message will never be received; the receive fails, and so will the
    // sender, when the transport fails on the mismatch it reports.
    complete(r, st);
    return Status();
  }
  int moved = 0;
  return receive_large(p, r, u.msg_id, u.address, moved);
}

Status ShmTransport::receive_large(Peer& p, Request* r, uint64_t msg_id, uint64_t address,
                                   int& moved) {
  r->msg_id = msg_id;
  if (address != 0 && p.cma && cma_threshold_ != 0) {
    bool refused = false;
    if (Status st = cma_read(p, *r, address, refused); !st.ok()) {
      complete(r, st);  // held by no list now: fail() would not see it
      return st;
    }
    if (!refused) {
      single_copy_messages_.fetch_add(1, std::memory_order_relaxed);
      single_copy_bytes_.fetch_add(r->bytes, std::memory_order_relaxed);
      p.outq.push_back(OutRec{RecordType::read, nullptr, msg_id});
      complete(r, Status());
      ++moved;
      return Status();
    }
    p.cma = false;  // from now on, this peer's messages come through the ring
    single_copy_refused_.fetch_add(1, std::memory_order_relaxed);
  }
  r->progress = 0;
  p.expected.push_back(r);
  p.outq.push_back(OutRec{RecordType::cts, nullptr, msg_id});
  return Status();
}

Status ShmTransport::cma_read(Peer& p, Request& r, uint64_t address, bool& refused) {
  if (address > UINT64_MAX - r.bytes) {
    return Status(ErrorCode::protocol,
                  fmt::format("rank {}: invalid record from rank {}: message {} of {} bytes offered "
                              "at address {:#x}",
                              name_, p.name, r.msg_id, r.bytes, address));
  }
  // Pieces of kCmaPiece: the kernel pins the pages of one call at a time, and a few hundred KiB
  // stay in cache between the two sides of the copy.
  auto* dst = static_cast<uint8_t*>(r.buf);
  size_t done = 0;
  while (done < r.bytes) {
    const size_t n = std::min(r.bytes - done, kCmaPiece);
    iovec local{dst + done, n};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address + done)), n};
    const ssize_t got = process_vm_readv(p.pid, &local, 1, &remote, 1, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    const int err = got == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    if (err == EPERM || err == EACCES || err == ENOSYS || err == ENOMEM) {
      // Not allowed here (ptrace restrictions, a seccomp filter, no CMA in the kernel).
      log::info("rank {}: reading rank {}'s memory is refused ({}); its large messages come "
                "through the shared-memory ring",
                name_, p.name, std::strerror(err));
      refused = true;
      return Status();
    }
    if (err == ESRCH) {
      return Status(ErrorCode::peer_lost,
                    fmt::format("rank {}: lost rank {} (process {} exited while its message was "
                                "read)",
                                name_, p.name, p.pid));
    }
    // The peer's memory is not there: it failed and freed the buffer, or it lied.
    WEFT_RETURN_IF_ERROR(check_peer(p));
    return Status(ErrorCode::protocol,
                  fmt::format("rank {}: rank {} offered {} bytes at address {:#x} for message {}, "
                              "but {} of them cannot be read ({})",
                              name_, p.name, r.bytes, address, r.msg_id, r.bytes - done,
                              std::strerror(err)));
  }
  // A sender that fails or leaves marks its segment before its send ends (and its buffer may be
  // reused): while it still says running, everything read was the message.
  if (p.hdr->state.load(std::memory_order_acquire) != kRunning) {
    Status st = check_peer(p);
    return st.ok() ? Status(ErrorCode::peer_lost,
                            fmt::format("rank {}: rank {} left while its message {} was read",
                                        name_, p.name, r.msg_id))
                   : st;
  }
  return Status();
}

void ShmTransport::return_credits(Peer& p, size_t bytes) {
  p.credits_to_return += bytes;
  if (p.credits_to_return > 0 && p.credits_to_return >= options_.eager_credit_bytes / 4) {
    p.outq.push_back(OutRec{RecordType::credit, nullptr, p.credits_to_return});
    p.credits_to_return = 0;
  }
}

Status ShmTransport::check_collective(const Peer& p, uint64_t tag, const Fingerprint& fp) {
  if (is_p2p(tag)) return Status();
  return collective_mismatch(name_, current_.load(), p.name, fp);
}

Status ShmTransport::match_check(const Peer& p, const Request& r, uint64_t bytes,
                                 const Fingerprint& remote) {
  return receive_mismatch(name_, r, p.name, bytes, remote);
}

void ShmTransport::begin_operation(const Fingerprint& fp) {
  current_.store(fp);
  // Messages parked before: checked against the new operation here; later arrivals are checked
  // against it when they arrive. Usually none is parked: then no peer lock is taken.
  Status st;
  for (auto& p : peers_) {
    if (parked_collective_.load(std::memory_order_acquire) == 0) break;
    std::lock_guard<std::mutex> lock(p->mu);
    for (const Unexpected& u : p->unexpected) {
      st = check_collective(*p, u.tag, u.fp);
      if (!st.ok()) break;
    }
    if (!st.ok()) break;
  }
  if (!st.ok()) {
    fail(st);
    return;
  }
  op_active_.store(true, std::memory_order_release);
}

void ShmTransport::end_operation() {
  wake_sleepers();
  op_active_.store(false, std::memory_order_release);
  if (p2p_used_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(bg_mu_);
    bg_cv_.notify_all();
  }
}

// ---- progress -------------------------------------------------------------------------------------

int ShmTransport::progress_all() {
  if (failed_.load(std::memory_order_acquire)) return 0;
  int moved = 0;
  for (auto& peer : peers_) {
    Peer& p = *peer;
    if (p.rank == rank_) continue;
    std::unique_lock<std::mutex> lock(p.mu, std::try_to_lock);
    if (!lock.owns_lock()) {
      ++moved;  // someone else is moving it; look again instead of sleeping
      continue;
    }
    Status st = progress_peer(p, moved);
    if (!st.ok()) {
      lock.unlock();
      fail(st);
      return moved + 1;
    }
  }
  return moved;
}

Status ShmTransport::progress_peer(Peer& p, int& moved) {
  if (failed_.load(std::memory_order_acquire)) return Status();
  WEFT_RETURN_IF_ERROR(read_ring(p, moved));
  if (!p.outq.empty()) WEFT_RETURN_IF_ERROR(flush(p, moved));
  return check_peer(p);
}

Status ShmTransport::check_peer(Peer& p) {
  const uint32_t state = p.hdr->state.load(std::memory_order_acquire);
  if (state == kRunning && !p.gone.load()) return Status();
  if (state == kFailed) {
    char text[kMaxErrorText + 1] = {};
    std::memcpy(text, p.hdr->error_text, kMaxErrorText);
    uint32_t code = p.hdr->error_code;
    if (code == 0 || code > static_cast<uint32_t>(kMaxErrorCode)) {
      code = static_cast<uint32_t>(ErrorCode::internal);
    }
    return Status(static_cast<ErrorCode>(code), fmt::format("rank {} reports: {}", p.name, text));
  }
  // Departed or gone: what it wrote before is still in the ring; read it first.
  if (p.in_ctl->tail.load(std::memory_order_acquire) != p.in_head) return Status();
  if (state == kDeparted) {
    const bool sends = std::any_of(p.outq.begin(), p.outq.end(),
                                   [](const OutRec& o) { return o.req != nullptr; });
    if (!p.posted.empty() || !p.expected.empty() || !p.rts_pending.empty() || sends) {
      return Status(ErrorCode::peer_lost,
                    fmt::format("rank {}: rank {} shut down while operations with it were pending",
                                name_, p.name));
    }
    return Status();
  }
  return Status(ErrorCode::peer_lost,
                fmt::format("rank {}: lost rank {} (process {} exited without closing the "
                            "communicator)",
                            name_, p.name, p.pid));
}

void ShmTransport::publish_head(Peer& p) {
  if (p.in_published != p.in_head) {
    p.in_ctl->head.store(p.in_head, std::memory_order_release);
    p.in_published = p.in_head;
  }
  // A producer that waits for room sets the flag, then looks at head again: one of the two
  // sides sees the other's store (full fences on both).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (p.in_ctl->producer_waiting.load(std::memory_order_relaxed) != 0) {
    p.in_ctl->producer_waiting.store(0, std::memory_order_relaxed);
    ring(*p.hdr);
  }
}

Status ShmTransport::read_ring(Peer& p, int& moved) {
  const uint64_t tail = p.in_ctl->tail.load(std::memory_order_acquire);
  if (tail == p.in_head) {
    // Nothing new; a producer waiting for room needs the (lazily published) head.
    if (p.in_ctl->producer_waiting.load(std::memory_order_relaxed) != 0) publish_head(p);
    return Status();
  }
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::protocol,
                  fmt::format("rank {}: corrupt shared-memory ring from rank {}: {}", name_, p.name, what));
  };
  if (tail - p.in_head > ring_bytes_ || (tail - p.in_head) % kRecordBytes != 0) {
    return bad(fmt::format("producer position {} against consumer {}", tail, p.in_head));
  }
  while (p.in_head != tail && !failed_.load(std::memory_order_relaxed)) {
    const uint64_t pos = p.in_head % ring_bytes_;
    const uint64_t avail = std::min<uint64_t>(tail - p.in_head, ring_bytes_ - pos);
    Record rec;
    std::memcpy(&rec, p.in + pos, kRecordBytes);
    if (rec.type == 0 || rec.type > kMaxRecordType) return bad(fmt::format("record type {}", rec.type));
    if (rec.len > ring_bytes_ || record_size(rec.len) > avail) {
      return bad(fmt::format("record of {} bytes with {} readable", rec.len, avail));
    }
    if (static_cast<RecordType>(rec.type) != RecordType::pad) {
      WEFT_RETURN_IF_ERROR(on_record(p, rec, p.in + pos + kRecordBytes, moved));
    }
    p.in_head += record_size(rec.len);
    p.consumed.store(p.in_head, std::memory_order_relaxed);
    // Give a streaming producer room as it goes (a quarter ring at a time).
    if (p.in_head - p.in_published >= ring_bytes_ / 4) {
      p.in_ctl->head.store(p.in_head, std::memory_order_release);
      p.in_published = p.in_head;
    }
    ++moved;
  }
  if (p.in_ctl->producer_waiting.load(std::memory_order_relaxed) != 0) publish_head(p);
  return Status();
}

Status ShmTransport::on_record(Peer& p, const Record& rec, const uint8_t* payload, int& moved) {
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::protocol,
                  fmt::format("rank {}: invalid record from rank {}: {}", name_, p.name, what));
  };
  const auto type = static_cast<RecordType>(rec.type);
  switch (type) {
    case RecordType::eager:
    case RecordType::rts: {
      if (rec.kind >= kOpKindCount || rec.dtype >= kDataTypeCount || rec.op >= kReduceOpCount) {
        return bad("unknown operation, dtype or reduce op");
      }
      if (type == RecordType::eager && rec.bytes != rec.len) return bad("eager length");
      if (type == RecordType::rts && (rec.len != 0 || rec.bytes == 0 || rec.bytes > (uint64_t{1} << 48))) {
        return bad("request-to-send length");
      }
      Fingerprint fp;
      fp.kind = static_cast<OpKind>(rec.kind);
      fp.dtype = static_cast<DataType>(rec.dtype);
      fp.op = static_cast<ReduceOp>(rec.op);
      fp.root = rec.root;
      fp.count = rec.count;
      fp.seq = rec.seq;
      WEFT_RETURN_IF_ERROR(check_collective(p, rec.tag, fp));
      Request* r = take_posted(p, rec.tag);
      if (r == nullptr) {
        Unexpected u{type, rec.tag, fp, static_cast<size_t>(rec.bytes), rec.msg_id, nullptr,
                     type == RecordType::rts ? rec.offset : 0};
        if (type == RecordType::eager && rec.len > 0) {
          u.data = static_cast<uint8_t*>(pool_.acquire(rec.len));
          std::memcpy(u.data, payload, rec.len);
        }
        park(p, u);
        return Status();
      }
      Status st = match_check(p, *r, rec.bytes, fp);
      if (!st.ok()) {
        complete(r, st);
        if (type == RecordType::eager) return_credits(p, rec.len);
        return is_p2p(rec.tag) ? Status() : st;
      }
      if (type == RecordType::eager) {
        if (rec.len > 0) std::memcpy(r->buf, payload, rec.len);
        return_credits(p, rec.len);
        complete(r, Status());
        ++moved;
        return Status();
      }
      return receive_large(p, r, rec.msg_id, rec.offset, moved);
    }
    case RecordType::cts: {
      auto it = std::find_if(p.rts_pending.begin(), p.rts_pending.end(),
                             [&](Request* r) { return r->msg_id == rec.msg_id; });
      if (it == p.rts_pending.end()) return bad(fmt::format("CTS for unknown message {}", rec.msg_id));
      Request* r = *it;
      p.rts_pending.erase(it);
      p.outq.push_back(OutRec{RecordType::data, r});
      return Status();
    }
    case RecordType::read: {
      auto it = std::find_if(p.rts_pending.begin(), p.rts_pending.end(),
                             [&](Request* r) { return r->msg_id == rec.msg_id; });
      if (it == p.rts_pending.end() || !offers_read(**it)) {
        return bad(fmt::format("read acknowledged for message {}, which was not offered", rec.msg_id));
      }
      Request* r = *it;
      p.rts_pending.erase(it);
      complete(r, Status());
      ++moved;
      return Status();
    }
    case RecordType::data: {
      auto it = std::find_if(p.expected.begin(), p.expected.end(),
                             [&](Request* r) { return r->msg_id == rec.msg_id; });
      if (it == p.expected.end()) return bad(fmt::format("data for unknown message {}", rec.msg_id));
      Request* r = *it;
      if (rec.offset != r->progress || rec.len > r->bytes - r->progress || rec.len == 0) {
        return bad(fmt::format("data at offset {} of {} bytes for a message of {} bytes ({} received)",
                               rec.offset, rec.len, r->bytes, r->progress));
      }
      std::memcpy(static_cast<uint8_t*>(r->buf) + r->progress, payload, rec.len);
      r->progress += rec.len;
      if (r->progress == r->bytes) {
        p.expected.erase(it);
        complete(r, Status());
        ++moved;
      }
      return Status();
    }
    case RecordType::credit:
      if (rec.bytes > options_.eager_credit_bytes - p.send_credits) return bad("credit overflow");
      p.send_credits += rec.bytes;
      return Status();
    case RecordType::pad:
      return Status();
  }
  return bad("record type");
}

Status ShmTransport::flush(Peer& p, int& moved) {
  bool wrote = false;
  while (!p.outq.empty() && !failed_.load(std::memory_order_relaxed)) {
    OutRec& o = p.outq.front();
    const uint64_t pos = p.out_tail % ring_bytes_;
    const uint64_t contig = ring_bytes_ - pos;
    size_t len = 0;
    if (o.type == RecordType::eager) len = o.req->bytes;
    // The cached head is enough unless it says the record does not fit: then read the real one.
    if (std::min<uint64_t>(ring_bytes_ - (p.out_tail - p.out_head), contig) <
        record_size(o.type == RecordType::data ? std::min(o.req->bytes - o.offset, max_chunk_)
                                               : len)) {
      p.out_head = p.out_ctl->head.load(std::memory_order_acquire);
    }
    const uint64_t head = p.out_head;
    const uint64_t free = ring_bytes_ - (p.out_tail - head);
    if (o.type == RecordType::data) {
      const size_t left = o.req->bytes - o.offset;
      len = std::min(left, max_chunk_);
      const uint64_t room = std::min(free, contig);
      if (record_size(len) > room && room >= kRecordBytes + kMinChunk) len = room - kRecordBytes;
    }
    const size_t need = record_size(len);
    bool room = need <= contig && need <= free;
    if (need > contig && free >= contig) {
      // Fill the end of the ring with a pad record; the record goes at the start.
      Record pad;
      pad.type = static_cast<uint32_t>(RecordType::pad);
      pad.len = static_cast<uint32_t>(contig - kRecordBytes);
      std::memcpy(p.out + pos, &pad, kRecordBytes);
      p.out_tail += contig;
      p.out_ctl->tail.store(p.out_tail, std::memory_order_release);
      continue;
    }
    if (!room) {
      // Ask the receiver to ring when it has made room, then look once more (it may have just
      // done so before seeing the flag).
      p.out_ctl->producer_waiting.store(1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      p.out_head = p.out_ctl->head.load(std::memory_order_relaxed);
      if (p.out_head != head) continue;
      nudge(*p.hdr);  // a sleeping consumer must wake to publish its head
      break;
    }
    Record rec;
    rec.type = static_cast<uint32_t>(o.type);
    rec.len = static_cast<uint32_t>(len);
    uint8_t* at = p.out + pos;
    if (o.req != nullptr) {
      const Request& r = *o.req;
      rec.tag = r.tag;
      rec.bytes = r.bytes;
      rec.msg_id = r.msg_id;
      rec.kind = static_cast<uint8_t>(r.fp.kind);
      rec.dtype = static_cast<uint8_t>(r.fp.dtype);
      rec.op = static_cast<uint8_t>(r.fp.op);
      rec.root = r.fp.root;
      rec.count = r.fp.count;
      rec.seq = r.fp.seq;
    }
    if (o.type == RecordType::cts || o.type == RecordType::read) rec.msg_id = o.value;
    if (o.type == RecordType::rts && offers_read(*o.req)) {
      rec.offset = reinterpret_cast<uintptr_t>(o.req->buf);
    }
    if (o.type == RecordType::credit) rec.bytes = o.value;
    if (o.type == RecordType::data) rec.offset = o.offset;
    if (len > 0) {
      std::memcpy(at + kRecordBytes, static_cast<const uint8_t*>(o.req->buf) + o.offset, len);
    }
    std::memcpy(at, &rec, kRecordBytes);
    p.out_tail += need;
    p.out_ctl->tail.store(p.out_tail, std::memory_order_release);
    wrote = true;
    ++moved;
    if (o.type == RecordType::data) {
      o.offset += len;
      nudge(*p.hdr);  // let the receiver copy this chunk out while the next goes in
      if (o.offset < o.req->bytes) continue;
    }
    Request* done = (o.type == RecordType::eager || o.type == RecordType::data) ? o.req : nullptr;
    p.outq.pop_front();
    if (done != nullptr) complete(done, Status());
  }
  p.want_room.store(!p.outq.empty(), std::memory_order_release);
  if (wrote) nudge(*p.hdr);
  return Status();
}

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
    // than cores they only take the core from the rank that must answer (a ring allreduce of 8
    // bytes, 4 ranks on 2 cores, two pretend hosts: 0.9 ms with 50 us of yielding passes, 0.4 ms
    // without). Returns false after them (the caller then sleeps elsewhere).
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
    if (Status st = direct_mismatch(); !st.ok()) {
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
    sleep_until_work(&completion, seen,
                     std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100)));
    idle_passes = 0;
  }
}

// ---- shared-buffer collectives --------------------------------------------------------------------

template <typename Ready>
Status ShmTransport::wait_shared(Peer& p, Ready ready, Clock::time_point deadline) {
  Clock::time_point idle_since{};
  for (uint32_t pass = 0;; ++pass) {
    if (ready()) return Status();
    if (pass % 64 != 63) {
      cpu_pause();
      continue;
    }
    // Now and then: wake the peers this rank's publication is for (before this rank may sleep
    // itself), move the rings (a peer's message for this very collective is a mismatch, its
    // failure report or exit ends the wait) and look at the clock.
    wake_sleepers();
    progress_all();
    if (failed_.load(std::memory_order_acquire)) return failure();
    if (ready()) return Status();
    if (p.rank != rank_ && (p.hdr->state.load(std::memory_order_acquire) != kRunning ||
                            p.gone.load(std::memory_order_acquire))) {
      if (ready()) return Status();  // it published before it left
      return Status(ErrorCode::peer_lost,
                    fmt::format("rank {}: rank {} left while {} waited for it", name_, p.name,
                                direct_fp_.describe()));
    }
    const auto now = Clock::now();
    if (now >= deadline) return Status(ErrorCode::timeout, fmt::format("waiting for rank {}", p.name));
    if (idle_since == Clock::time_point{}) idle_since = now;
    const auto idle = now - idle_since;
    if (!oversubscribed_ && idle < kSpinAlone) continue;
    if (oversubscribed_ && idle < kSpinShared) {
      spread_out(now);
      std::this_thread::yield();
      continue;
    }
    sleep_unless(ready, std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100)));
  }
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

Result<uint8_t*> ShmTransport::shared_begin(const Fingerprint& fp, Clock::time_point deadline) {
  if (failed_.load(std::memory_order_acquire)) return failure();
  const uint64_t c = ++direct_call_;
  direct_fp_ = fp;
  // The slot we are about to rewrite held operation c - 2: every peer must have read it, which
  // it has once it published c - 1.
  if (c >= 2) {
    for (auto& peer : peers_) {
      Peer& p = *peer;
      if (p.rank == rank_) continue;
      const DirectSlot& prev = *p.direct[(c - 1) & 1];
      WEFT_RETURN_IF_ERROR(wait_shared(
          p, [&] { return prev.call.load(std::memory_order_acquire) >= c - 1; }, deadline));
    }
  }
  DirectSlot& s = own_->direct(static_cast<int>(c & 1));
  // No "being written" marker: the peers poll this line, and every extra store to it while they
  // do can cost them another transfer. `call` (last, release) says the fields are complete.
  s.seq.store(fp.seq, std::memory_order_relaxed);
  s.count.store(fp.count, std::memory_order_relaxed);
  s.kind.store(static_cast<uint8_t>(fp.kind), std::memory_order_relaxed);
  s.dtype.store(static_cast<uint8_t>(fp.dtype), std::memory_order_relaxed);
  s.op.store(static_cast<uint8_t>(fp.op), std::memory_order_relaxed);
  s.root.store(fp.root, std::memory_order_relaxed);
  return direct_data(s);
}

void ShmTransport::shared_publish(size_t bytes) {
  DirectSlot& s = own_->direct(static_cast<int>(direct_call_ & 1));
  direct_bytes_ = std::min(bytes, kDirectBytes);
  s.bytes.store(direct_bytes_, std::memory_order_relaxed);
  s.call.store(direct_call_, std::memory_order_release);
  // Peers asleep on their doorbell are woken later (wake_sleepers): a full fence here would stall
  // this rank until the slot's line left its store buffer, in series with the wait that follows.
  wake_pending_ = true;
}

void ShmTransport::wake_sleepers() {
  if (!wake_pending_) return;
  wake_pending_ = false;
  // Pairs with the sleeper's announce-then-look (wait_shared): either it sees the published slot
  // or this sees its announcement.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (auto& peer : peers_) {
    if (peer->rank != rank_ && peer->hdr->sleepers.load(std::memory_order_relaxed) != 0) {
      ring(*peer->hdr);
    }
  }
}

Result<std::span<const uint8_t>> ShmTransport::shared_read(int peer, Clock::time_point deadline) {
  const uint64_t c = direct_call_;
  const int parity = static_cast<int>(c & 1);
  const int index = index_of(peer);
  if (index < 0) return not_here(peer);
  Peer& p = *peers_[static_cast<size_t>(index)];
  const DirectSlot& s = *p.direct[parity];
  if (index == rank_) {
    // This rank's own slot: nothing to check, and nothing to load from it either. Its stores may
    // still wait in the store buffer for the line, which the peers are polling; a load that the
    // buffer cannot forward would wait for them (about a cache-line round trip).
    return std::span<const uint8_t>(direct_data(s), direct_bytes_);
  }
  WEFT_RETURN_IF_ERROR(
      wait_shared(p, [&] { return s.call.load(std::memory_order_acquire) >= c; }, deadline));
  // Everything below comes from another process: checked before use.
  auto bad = [&](const std::string& what) {
    Status st(ErrorCode::protocol,
              fmt::format("rank {}: rank {} wrote a malformed shared-memory slot: {}", name_,
                          peer, what));
    fail(st);
    return st;
  };
  const uint64_t call = s.call.load(std::memory_order_acquire);
  if (call != c) return bad(fmt::format("operation {} where {} was expected", call, c));
  const Fingerprint remote = slot_fingerprint(s);
  const uint64_t bytes = s.bytes.load(std::memory_order_relaxed);
  if (bytes > kDirectBytes) return bad(fmt::format("{} bytes (at most {})", bytes, kDirectBytes));
  if (!(remote == direct_fp_)) {
    // Both ranks are at the same shared-buffer call, so these are the calls they made (whatever
    // the sequence numbers say). describe() of a hostile fingerprint stays bounded: unknown enum
    // values print as numbers.
    Status st(ErrorCode::mismatch, fmt::format("rank {} called {} but rank {} called {}", name_,
                                               direct_fp_.describe(), peer, remote.describe()));
    fail(st);
    return st;
  }
  return std::span<const uint8_t>(direct_data(s), static_cast<size_t>(bytes));
}

Status ShmTransport::direct_mismatch() {
  const Fingerprint current = current_.load();
  if (current.seq == 0) return Status();
  for (auto& peer : peers_) {
    const Peer& p = *peer;
    if (p.rank == rank_) continue;
    for (const DirectSlot* s : p.direct) {
      // A slot whose seq is this collective's: the peer runs it through its shared buffer while
      // this rank exchanges messages for it, a disagreement whatever else the slot says (its
      // other fields may still be half written; they only make the message).
      const uint64_t call = s->call.load(std::memory_order_acquire);
      if (call == 0 || s->seq.load(std::memory_order_relaxed) != current.seq) continue;
      Status st = collective_mismatch(name_, current, p.name, slot_fingerprint(*s));
      if (st.ok()) {
        st = Status(ErrorCode::mismatch,
                    fmt::format("rank {} runs {} by messages but rank {} through shared memory: "
                                "the ranks chose different algorithms (different options?)",
                                name_, current.describe(), p.name));
      }
      return st;
    }
  }
  return Status();
}

void ShmTransport::background_loop() {
  Clock::time_point last_moved{};
  while (true) {
    {
      std::unique_lock<std::mutex> lock(bg_mu_);
      bg_cv_.wait(lock, [&] {
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
    sleep_until_work(nullptr, 0, std::chrono::milliseconds(100));
  }
}

void ShmTransport::watch_loop() {
  struct Watched {
    Peer* peer;
    Fd pidfd;
  };
  std::vector<Watched> watched;
  for (auto& p : peers_) {
    if (p->rank == rank_ || p->pid == ::getpid()) continue;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, p->pid, 0));
    watched.push_back(Watched{p.get(), Fd(fd)});
  }
  while (!watched.empty()) {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{watch_wake_.get(), POLLIN, 0});
    for (auto& w : watched) fds.push_back(pollfd{w.pidfd.get(), POLLIN, 0});
    // Without pidfds (old kernels) fall back to probing the pids every 200 ms.
    int n = ::poll(fds.data(), fds.size(), 200);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    for (size_t i = 0; i < watched.size();) {
      Peer& p = *watched[i].peer;
      bool exited = watched[i].pidfd.valid() ? (fds[i + 1].revents != 0)
                                             : (::kill(p.pid, 0) != 0 && errno == ESRCH);
      if (!exited) {
        ++i;
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(p.mu);
        p.gone.store(true);
      }
      watched.erase(watched.begin() + static_cast<std::ptrdiff_t>(i));
      fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      // Whoever waits notices in its next pass (check_peer); make sure it makes one.
      ring(own_->header());
      if (p.hdr->state.load(std::memory_order_acquire) == kRunning) {
        std::unique_lock<std::mutex> lock(p.mu);
        Status st = check_peer(p);
        lock.unlock();
        if (!st.ok()) fail(st);
      }
    }
  }
}

// ---- failure ----------------------------------------------------------------------------------------

Status ShmTransport::heartbeat(Clock::time_point now, std::chrono::milliseconds peer_timeout) {
  if (failed_.load(std::memory_order_acquire)) return Status();
  own_->header().heartbeat.fetch_add(1, std::memory_order_relaxed);
  for (auto& peer : peers_) {
    Peer& p = *peer;
    if (p.rank == rank_ || p.gone.load()) continue;
    if (p.hdr->state.load(std::memory_order_acquire) != kRunning) continue;
    const uint64_t beat = p.hdr->heartbeat.load(std::memory_order_relaxed);
    if (beat != p.hb_seen || p.hb_heard == Clock::time_point{}) {
      p.hb_seen = beat;
      p.hb_heard = now;
    } else if (now - p.hb_heard >= peer_timeout) {
      p.silent.store(true);
      return Status(ErrorCode::peer_lost,
                    fmt::format("rank {}: rank {} is not responding: its heartbeat stood still for "
                                "{:.1f} s (peer_timeout {:g} s; process {} is stopped or frozen)",
                                name_, p.name,
                                std::chrono::duration<double>(now - p.hb_heard).count(),
                                std::chrono::duration<double>(peer_timeout).count(), p.pid));
    }
  }
  return Status();
}

std::vector<int> ShmTransport::lost_peers() const {
  std::vector<int> out;
  for (const auto& p : peers_) {
    const bool exited = p->gone.load() && p->hdr != nullptr &&
                        p->hdr->state.load(std::memory_order_acquire) != kDeparted;
    if (exited || p->silent.load()) out.push_back(p->name);
  }
  return out;
}

Status ShmTransport::failure() const {
  std::lock_guard<std::mutex> lock(err_mu_);
  return error_;
}

Status ShmTransport::error() const {
  if (!failed_.load(std::memory_order_acquire)) return Status();
  return failure();
}

void ShmTransport::fail(const Status& status) {
  if (!failed_.exchange(true, std::memory_order_acq_rel)) {
    {
      std::lock_guard<std::mutex> lock(err_mu_);
      error_ = status;
    }
    SegmentHeader& own = own_->header();
    if (own.state.load(std::memory_order_acquire) == kRunning) {
      const std::string& text = status.message();
      const size_t n = std::min(text.size(), kMaxErrorText - 1);
      std::memcpy(own.error_text, text.data(), n);
      own.error_text[n] = '\0';
      own.error_code = static_cast<uint32_t>(status.code());
      own.state.store(kFailed, std::memory_order_release);
    }
    for (auto& p : peers_) {
      if (p->hdr != nullptr) ring(*p->hdr);
    }
  }
  fail_locked_out(failure());
}

void ShmTransport::fail_locked_out(const Status& status) {
  std::vector<Request*> reqs;
  for (auto& peer : peers_) {
    Peer& p = *peer;
    std::lock_guard<std::mutex> lock(p.mu);  // waits for a copy in progress
    for (Request* r : p.posted) reqs.push_back(r);
    for (Request* r : p.rts_pending) reqs.push_back(r);
    for (Request* r : p.expected) reqs.push_back(r);
    for (OutRec& o : p.outq) {
      if (o.req != nullptr && o.type != RecordType::rts) reqs.push_back(o.req);
    }
    for (Unexpected& u : p.unexpected) {
      pool_.release(u.data, u.bytes);
      if (!is_p2p(u.tag)) parked_collective_.fetch_sub(1, std::memory_order_acq_rel);
    }
    p.posted.clear();
    p.rts_pending.clear();
    p.expected.clear();
    p.outq.clear();
    p.unexpected.clear();
  }
  {
    std::lock_guard<std::mutex> lock(any_mu_);
    for (Request* r : any_posted_) reqs.push_back(r);
    any_posted_.clear();
  }
  for (Request* r : reqs) r->complete(status);
  ring(own_->header());
}

}  // namespace
}  // namespace shm

// ---- public entry points ------------------------------------------------------------------------------

std::string shm_host_key(const std::string& host_id) {
  struct stat st {};
  unsigned long long ns = 0;
  if (::stat("/proc/self/ns/pid", &st) == 0) ns = static_cast<unsigned long long>(st.st_ino);
  // The same tmpfs has the same device and root inode in every mount namespace that shows it;
  // another instance has another (anonymous) device number.
  std::string shm = "none";
  if (::stat("/dev/shm", &st) == 0) {
    shm = fmt::format("{:x}:{:x}", static_cast<unsigned long long>(st.st_dev),
                      static_cast<unsigned long long>(st.st_ino));
  }
  return fmt::format("{}/pidns:{}/shm:{}/uid:{}", host_id, ns, shm, ::geteuid());
}

Result<std::vector<std::string>> exchange_host_keys(Store& store, int rank, int size,
                                                    const std::string& key,
                                                    std::chrono::milliseconds timeout) {
  WEFT_RETURN_IF_ERROR(store.set(fmt::format("shm/host/{}", rank), key));
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  auto keys = gather_records(
      store, ranks, [](int r) { return fmt::format("shm/host/{}", r); }, timeout);
  if (!keys.ok()) {
    return keys.status().with_context(fmt::format("rank {}: waiting for the ranks' host identities", rank));
  }
  return keys;
}

Result<std::unique_ptr<Transport>> make_shm_transport(const ShmTransportConfig& config, Store& store,
                                                      BufferPool& pool) {
  auto t = std::make_unique<shm::ShmTransport>(config, pool);
  Status st = t->start(store, config.token);
  if (!st.ok()) return st;
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace weft
