// Shared-buffer collectives (Transport::shared_begin/shared_publish/shared_read): each rank
// publishes its input in a SharedSlot of its own segment and reads its peers' in place.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "transport/shm/shm_transport_impl.h"

namespace weft::shm {
namespace {

// The fingerprint a SharedSlot carries (written by another process: enum values unchecked).
Fingerprint slot_fingerprint(const SharedSlot& s) {
  Fingerprint fp;
  fp.seq = s.seq.load(std::memory_order_relaxed);
  fp.count = s.count.load(std::memory_order_relaxed);
  fp.kind = static_cast<OpKind>(s.kind.load(std::memory_order_relaxed));
  fp.dtype = static_cast<DataType>(s.dtype.load(std::memory_order_relaxed));
  fp.op = static_cast<ReduceOp>(s.op.load(std::memory_order_relaxed));
  fp.root = s.root.load(std::memory_order_relaxed);
  return fp;
}

}  // namespace

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
                                shared_fp_.describe()));
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

Result<uint8_t*> ShmTransport::shared_begin(const Fingerprint& fp, Clock::time_point deadline) {
  if (failed_.load(std::memory_order_acquire)) return failure();
  const uint64_t c = ++shared_call_;
  shared_fp_ = fp;
  // The slot we are about to rewrite held operation c - 2: every peer must have read it, which
  // it has once it published c - 1.
  if (c >= 2) {
    for (auto& peer : peers_) {
      Peer& p = *peer;
      if (p.rank == rank_) continue;
      const SharedSlot& prev = *p.shared[(c - 1) & 1];
      WEFT_RETURN_IF_ERROR(wait_shared(
          p, [&] { return prev.call.load(std::memory_order_acquire) >= c - 1; }, deadline));
    }
  }
  SharedSlot& s = own_->shared_slot(static_cast<int>(c & 1));
  // No "being written" marker: the peers poll this line, and every extra store to it while they
  // do can cost them another transfer. `call` (last, release) says the fields are complete.
  s.seq.store(fp.seq, std::memory_order_relaxed);
  s.count.store(fp.count, std::memory_order_relaxed);
  s.kind.store(static_cast<uint8_t>(fp.kind), std::memory_order_relaxed);
  s.dtype.store(static_cast<uint8_t>(fp.dtype), std::memory_order_relaxed);
  s.op.store(static_cast<uint8_t>(fp.op), std::memory_order_relaxed);
  s.root.store(fp.root, std::memory_order_relaxed);
  return shared_data(s);
}

void ShmTransport::shared_publish(size_t bytes) {
  SharedSlot& s = own_->shared_slot(static_cast<int>(shared_call_ & 1));
  shared_bytes_ = std::min(bytes, kSharedBytes);
  s.bytes.store(shared_bytes_, std::memory_order_relaxed);
  s.call.store(shared_call_, std::memory_order_release);
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
  const uint64_t c = shared_call_;
  const int parity = static_cast<int>(c & 1);
  const int index = index_of(peer);
  if (index < 0) return not_here(peer);
  Peer& p = *peers_[static_cast<size_t>(index)];
  const SharedSlot& s = *p.shared[parity];
  if (index == rank_) {
    // This rank's own slot: nothing to check, and nothing to load from it either. Its stores may
    // still wait in the store buffer for the line, which the peers are polling; a load that the
    // buffer cannot forward would wait for them (about a cache-line round trip).
    return std::span<const uint8_t>(shared_data(s), shared_bytes_);
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
  if (bytes > kSharedBytes) return bad(fmt::format("{} bytes (at most {})", bytes, kSharedBytes));
  if (!(remote == shared_fp_)) {
    // Both ranks are at the same shared-buffer call, so these are the calls they made (whatever
    // the sequence numbers say). describe() of a hostile fingerprint stays bounded: unknown enum
    // values print as numbers.
    Status st(ErrorCode::mismatch, fmt::format("rank {} called {} but rank {} called {}", name_,
                                               shared_fp_.describe(), peer, remote.describe()));
    fail(st);
    return st;
  }
  return std::span<const uint8_t>(shared_data(s), static_cast<size_t>(bytes));
}

Status ShmTransport::shared_mismatch() {
  const Fingerprint current = current_.load();
  if (current.seq == 0) return Status();
  for (auto& peer : peers_) {
    const Peer& p = *peer;
    if (p.rank == rank_) continue;
    for (const SharedSlot* s : p.shared) {
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

}  // namespace weft::shm
