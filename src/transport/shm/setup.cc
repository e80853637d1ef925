// Life cycle of the shared-memory transport: set-up (segments, peers, threads), the begin and
// end of operations, clean close and teardown, and the public entry points.
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "rendezvous/store_common.h"
#include "runtime/buffer_pool.h"
#include "transport/shm/shm_transport_impl.h"

namespace weft {
namespace shm {

Status ShmTransport::start(Store& store, uint64_t token) {
  remove_stale_segments();
  const std::string name = fmt::format("/weft-{:016x}-{}-{}", token, rank_, ::getpid());
  auto own = Segment::create(name, rank_, size_, token, ring_bytes_);
  if (!own.ok()) return own.status();
  own_ = std::move(own.value());
  // Our SharedSlots: written through our mapping once now, as the rings below.
  std::memset(static_cast<void*>(&own_->shared_slot(0)), 0, 2 * kSharedSlotBytes);
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
    auto p = std::make_unique<Peer>(matcher_, r, names_[static_cast<size_t>(r)],
                                    options_.eager_credit_bytes);
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
      // And map the peer's SharedSlots now: the first read of each page faults too.
      for (int parity = 0; parity < 2; ++parity) {
        p->shared[parity] = &p->seg->shared_slot(parity);
        const volatile uint8_t* page = reinterpret_cast<const uint8_t*>(p->shared[parity]);
        for (size_t off = 0; off < kSharedSlotBytes; off += kPage) (void)page[off];
      }
    } else {
      for (int parity = 0; parity < 2; ++parity) p->shared[parity] = &own_->shared_slot(parity);
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
  for (auto& p : peers_) {
    MutexLock lock(p->mu);  // no other thread runs yet; for the analysis
    matcher_.add_peer(p->mu, p->queues);
  }
  started_ = true;
  background_ = std::jthread([this] { background_loop(); });
  bool watch = false;
  for (auto& p : peers_) watch = watch || (p->rank != rank_ && p->pid != ::getpid());
  if (watch) {
    watch_wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    watcher_ = std::jthread([this] { watch_loop(); });
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
    MutexLock lock(bg_mu_);
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
  // fail() drained the queues; what a late post parked since is released here.
  for (auto& p : peers_) {
    MutexLock lock(p->mu);
    p->queues.for_each_parked([&](ShmParked& a) { pool_.release(a.arrival.data, a.bytes); });
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
      MutexUniqueLock lock(p.mu);
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

void ShmTransport::note_p2p() {
  if (p2p_used_.exchange(true, std::memory_order_acq_rel)) return;
  MutexLock lock(bg_mu_);
  bg_cv_.notify_all();
}

void ShmTransport::begin_operation(const Fingerprint& fp) {
  current_.store(fp);
  // Messages parked before: checked against the new operation here; later arrivals are checked
  // against it when they arrive. Usually none is parked: then no peer lock is taken.
  Status st;
  for (auto& p : peers_) {
    if (matcher_.parked_collectives() == 0) break;
    MutexLock lock(p->mu);
    st = p->queues.check_parked(name_, fp);
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
    MutexLock lock(bg_mu_);
    bg_cv_.notify_all();
  }
}

}  // namespace shm

// ---- public entry points (shm_transport.h) ------------------------------------------------------

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
