// Liveness and failure in the shared-memory transport: watching peer processes (pidfd), heartbeats,
// and failing the transport (locally, or as a peer's segment reports through check_peer).
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "runtime/buffer_pool.h"
#include "transport/shm/shm_transport_impl.h"

namespace weft::shm {

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
        MutexLock lock(p.mu);
        p.gone.store(true);
      }
      watched.erase(watched.begin() + static_cast<std::ptrdiff_t>(i));
      fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      // Whoever waits notices in its next pass (check_peer); make sure it makes one.
      ring(own_->header());
      if (p.hdr->state.load(std::memory_order_acquire) == kRunning) {
        MutexUniqueLock lock(p.mu);
        Status st = check_peer(p);
        lock.unlock();
        if (!st.ok()) fail(st);
      }
    }
  }
}

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
  MutexLock lock(err_mu_);
  return error_;
}

Status ShmTransport::error() const {
  if (!failed_.load(std::memory_order_acquire)) return Status();
  return failure();
}

void ShmTransport::fail(const Status& status) {
  if (!failed_.exchange(true, std::memory_order_acq_rel)) {
    {
      MutexLock lock(err_mu_);
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
  // Another thread's fail() may still be completing requests it took from the queues: the
  // caller (e.g. an operation's Context, which frees its requests next) must not return before
  // that thread is done with them.
  while (completing_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void ShmTransport::fail_locked_out(const Status& status) {
  completing_.fetch_add(1, std::memory_order_acq_rel);
  std::vector<Request*> reqs;
  for (auto& peer : peers_) {
    Peer& p = *peer;
    MutexLock lock(p.mu);  // waits for a copy in progress
    PeerQueues<Unexpected>::Drained drained = p.queues.drain();
    for (Request* r : drained.posted) reqs.push_back(r);
    for (Request* r : p.rts_pending) reqs.push_back(r);
    for (Request* r : p.expected) reqs.push_back(r);
    for (OutRec& o : p.outq) {
      if (o.req != nullptr && o.type != RecordType::rts) reqs.push_back(o.req);
    }
    for (ShmParked& a : drained.parked) pool_.release(a.arrival.data, a.bytes);
    p.rts_pending.clear();
    p.expected.clear();
    p.outq.clear();
  }
  for (Request* r : matcher_.close_any()) reqs.push_back(r);
  for (Request* r : reqs) r->complete(status);
  ring(own_->header());
  completing_.fetch_sub(1, std::memory_order_release);
}

}  // namespace weft::shm
