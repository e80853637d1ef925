// Life cycle of the TCP transport: start, failure (local or reported by a peer), clean close.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/cpus.h"
#include "base/log.h"
#include "transport/tcp/mesh.h"
#include "transport/tcp/transport_impl.h"

namespace weft::tcp {
namespace {

// The largest payload of one frame on a secured link (one record; records may be 16 MiB).
constexpr uint64_t kSecureFramePayload = uint64_t{4} << 20;
static_assert(kSecureFramePayload + kHeaderBytes <= security::RecordLimits{}.max_record);

}  // namespace

TcpTransport::TcpTransport(const TcpTransportConfig& config, BufferPool& pool)
    : rank_(config.rank),
      size_(config.size),
      comm_(static_cast<uint32_t>(config.token)),
      options_(config.options),
      pool_(pool),
      secure_(config.security != security::SecurityMode::off),
      max_frame_payload_(secure_ ? kSecureFramePayload : UINT64_MAX) {
  limits_.max_eager = options_.eager_threshold;
  for (int r = 0; r < size_; ++r) {
    auto p = std::make_unique<Peer>(matcher_, r);
    MutexLock lock(p->mu);  // nobody else sees it yet; for the analysis
    p->send_credits = options_.eager_credit_bytes;
    matcher_.add_peer(p->mu, p->queues);
    peers_.push_back(std::move(p));
  }
}

TcpTransport::~TcpTransport() {
  if (!failed_.load()) fail(Status(ErrorCode::aborted, fmt::format("rank {}: communicator destroyed", rank_)));
  reactors_.clear();  // joins the threads; nothing references the peers after this
}

Status TcpTransport::start(std::vector<std::vector<Fd>> sockets,
                           std::vector<std::vector<LinkCrypto>> crypto) {
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) return errno_status("eventfd");
  int nreactors = std::max(1, std::min(options_.reactor_threads, std::max(1, size_ - 1)));
  for (int i = 0; i < nreactors; ++i) {
    auto r = Reactor::create(fmt::format("weft-r{}-{}", rank_, i));
    if (!r.ok()) return r.status();
    reactors_.push_back(std::move(r.value()));
  }
  int next = 0;
  for (int r = 0; r < size_; ++r) {
    Peer& p = *peers_[r];
    if (r == rank_) continue;
    p.reactor = reactors_[next++ % nreactors].get();
    for (size_t i = 0; i < sockets[r].size(); ++i) {
      auto c = std::make_unique<Connection>();
      c->fd = std::move(sockets[r][i]);
      c->peer = r;
      c->index = static_cast<int>(i);
      if (secure_) {
        if (r >= static_cast<int>(crypto.size()) || i >= crypto[r].size() ||
            !crypto[r][i].sealer || !crypto[r][i].opener) {
          return Status(ErrorCode::internal, "secured socket without its record layer");
        }
        c->sealer = std::move(crypto[r][i].sealer);
        MutexLock lock(c->read_mu);  // nobody else sees it yet; for the analysis
        c->opener = std::move(crypto[r][i].opener);
      }
      p.conns.push_back(std::move(c));
    }
  }
  for (int r = 0; r < size_; ++r) {
    Peer& p = *peers_[r];
    for (auto& c : p.conns) {
      Connection* conn = c.get();
      Peer* peer = &p;
      WEFT_RETURN_IF_ERROR(p.reactor->add(conn->fd.get(), kEvents,
                                          [this, peer, conn](uint32_t ev) { on_event(*peer, *conn, ev); }));
    }
  }
  return Status();
}

Status TcpTransport::failure() const {
  MutexLock lock(err_mu_);
  return error_;
}

Status TcpTransport::error() const { return failure(); }

void TcpTransport::begin_operation(const Fingerprint& fp) {
  Status st;
  {
    MutexLock fp_lock(fp_mu_);
    current_ = fp;
    // Messages of collectives parked before: checked against the new operation here (later
    // arrivals are checked against it when they arrive). Usually none: no peer lock is taken.
    for (auto& p : peers_) {
      if (matcher_.parked_collectives() == 0) break;
      MutexLock lock(p->mu);
      st = p->queues.check_parked(rank_, fp);
      if (!st.ok()) break;
    }
  }
  if (!st.ok()) {
    fail(st);
    return;
  }
  op_thread_ = std::this_thread::get_id();
  for (auto& p : peers_) p->caller_reading.store(true, std::memory_order_seq_cst);
  set_reactor_reads(false);
  op_active_.store(true, std::memory_order_release);
}

void TcpTransport::end_operation() {
  if (!op_active_.exchange(false, std::memory_order_acq_rel)) return;
  for (auto& p : peers_) p->caller_reading.store(false, std::memory_order_seq_cst);
  // Queues this thread was finishing go back to the reactor (control frames may still wait).
  for (auto& p : peers_) {
    MutexLock lock(p->mu);
    for (auto& c : p->conns) {
      if (!c->out_blocked.load(std::memory_order_relaxed) || c->closed) continue;
      c->out_blocked.store(false, std::memory_order_relaxed);
      if (!c->want_out && !c->outq.empty()) {
        c->want_out = true;
        (void)p->reactor->modify(c->fd.get(), epoll_events(*c));
      }
    }
  }
  // Between collectives nobody needs the reactor to read: what arrives waits in the socket for
  // the next operation, which reads it first thing. Point-to-point traffic does need it (a
  // receive or a rendezvous send completes while its caller sleeps), so once a point-to-point
  // request was posted the reactor reads between operations again. Re-registering EPOLLIN
  // reports data that is already waiting, so nothing is stranded.
  if (p2p_used_.load(std::memory_order_seq_cst)) set_reactor_reads(true);
  // Readiness the reactor left to this thread is picked up here.
  for (auto& p : peers_) {
    for (auto& c : p->conns) {
      if (c->missed.exchange(false, std::memory_order_seq_cst)) (void)drain_reads(*p, *c);
    }
  }
}

void TcpTransport::note_p2p() {
  // Paired with end_operation (both seq_cst): either it sees p2p_used_ or this sees the operation
  // over, so the reactor reads whenever a point-to-point request can be waiting.
  p2p_used_.store(true, std::memory_order_seq_cst);
  if (!op_active_.load(std::memory_order_seq_cst)) set_reactor_reads(true);
}

void TcpTransport::set_reactor_reads(bool on) {
  MutexLock arm_lock(arm_mu_);
  if (reactor_reads_ == on) return;
  reactor_reads_ = on;
  for (auto& p : peers_) {
    MutexLock lock(p->mu);
    for (auto& c : p->conns) {
      if (c->closed || c->reactor_reads == on) continue;
      c->reactor_reads = on;
      (void)p->reactor->modify(c->fd.get(), epoll_events(*c));  // fails only for a closed socket
    }
  }
}

void TcpTransport::fail_async(const Status& status) {
  {
    MutexLock lock(err_mu_);
    if (!error_.ok()) return;
    error_ = status;
    failed_.store(true, std::memory_order_release);
  }
  if (status.code() == ErrorCode::aborted) {
    log::debug("{}", status.to_string());
  } else {
    log::warn("{}", status.to_string());
  }
  for (Request* r : matcher_.close_any()) r->complete(status);
  for (auto& p : peers_) {
    Peer* peer = p.get();
    if (peer->rank == rank_) {
      drain_peer(*peer, status, false);
      continue;
    }
    peer->reactor->post([this, peer, status] { drain_peer(*peer, status, true); });
  }
}

void TcpTransport::fail(const Status& status) {
  fail_async(status);
  // Make sure every reactor has run its drain (queued before this barrier) before returning.
  for (auto& r : reactors_) r->run_sync([] {});
}

void TcpTransport::drain_peer(Peer& p, const Status& status, bool tell_peer) {
  std::vector<Request*> reqs;
  std::vector<std::unique_lock<Mutex>> read_locks;  // a caller may be reading right now
  for (auto& c : p.conns) read_locks.emplace_back(c->read_mu);
  MutexLock lock(p.mu);
  PeerQueues<Unexpected*>::Drained drained = p.queues.drain();
  for (Request* r : drained.posted) reqs.push_back(r);
  for (Request* r : p.rts_pending) reqs.push_back(r);
  for (Request* r : p.expected) reqs.push_back(r);
  // A parked eager message whose payload was still arriving is also its connection's
  // cur_unexp: freed here, once (parked messages have no waiting receive).
  for (TcpParked& a : drained.parked) {
    Unexpected* u = a.arrival;
    for (auto& c : p.conns) {
      if (c->cur_unexp == u) c->cur_unexp = nullptr;
    }
    if (u->data != nullptr) pool_.release(u->data, u->bytes);
    free_unexpected(u);
  }
  p.rts_pending.clear();
  p.expected.clear();
  for (auto& c : p.conns) {
    for (OutFrame& f : c->outq) {
      if (f.req != nullptr) reqs.push_back(f.req);
    }
    if (c->cur_req != nullptr) reqs.push_back(c->cur_req);
    if (c->cur_unexp != nullptr) {
      // Matched while its payload arrived: out of the parked list, its receive waits for it.
      Unexpected* u = c->cur_unexp;
      if (u->waiting != nullptr) {
        reqs.push_back(u->waiting);
        p.queues.release_staged(u->bytes);
      }
      if (u->data != nullptr) pool_.release(u->data, u->bytes);
      free_unexpected(u);
    }
    c->cur_req = nullptr;
    c->cur_unexp = nullptr;
    c->state = Connection::RecvState::header;
    c->remaining = 0;
    // Every socket carries the error before its end, so whichever the peer reads first explains.
    // (Secured: only while nothing queued was sealed, else the error's record would overtake
    // records the peer expects first.)
    bool can_tell = tell_peer && !c->closed && !c->eof &&
                    (c->outq.empty() ||
                     (c->outq.front().written == 0 && c->outq.front().sealed == nullptr));
    if (can_tell) {
      // Best effort: the peers learn why, instead of only seeing the connection drop.
      std::string text = status.message().substr(0, kMaxErrorText);
      uint8_t buf[kHeaderBytes + kMaxErrorText];
      FrameHeader h;
      h.type = FrameType::error;
      h.comm = comm_;
      h.offset = static_cast<uint64_t>(status.code());
      h.length = text.size();
      encode_header(h, buf);
      std::memcpy(buf + kHeaderBytes, text.data(), text.size());
      [[maybe_unused]] ssize_t w = -1;
      if (!secure_) {
        w = ::send(c->fd.get(), buf, kHeaderBytes + text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      } else {
        // The same frame as records: the header record, then the text's.
        OutFrame f;
        std::memcpy(f.header, buf, kHeaderBytes);
        f.payload = buf + kHeaderBytes;
        f.payload_len = text.size();
        if (seal_frame(p, *c, f).ok()) {
          w = ::send(c->fd.get(), f.sealed.get(), f.sealed_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
      }
      log::debug("rank {}: told rank {} on socket {} ({} bytes sent)", rank_, p.rank, c->index, w);
    } else {
      log::debug("rank {}: could not tell rank {} on socket {} (tell={} closed={} eof={} queued={})",
                 rank_, p.rank, c->index, tell_peer, c->closed.load(), c->eof.load(), c->outq.size());
    }
    c->outq.clear();
    if (!c->closed && p.reactor != nullptr) {
      p.reactor->remove(c->fd.get());
      ::shutdown(c->fd.get(), SHUT_RDWR);
      c->closed = true;
    }
  }
  std::sort(reqs.begin(), reqs.end());
  reqs.erase(std::unique(reqs.begin(), reqs.end()), reqs.end());
  for (Request* r : reqs) r->complete(status);
  closing_.notify();
}

Status TcpTransport::heartbeat(std::chrono::steady_clock::time_point now,
                               std::chrono::milliseconds peer_timeout) {
  if (failed_.load(std::memory_order_acquire)) return Status();
  for (auto& peer : peers_) {
    Peer& p = *peer;
    if (is_self(p)) continue;
    {
      MutexLock lock(p.mu);
      if (p.departed) continue;  // it said goodbye: silence is expected
    }
    uint64_t rx = p.rx_count.load(std::memory_order_relaxed);
    if (rx == p.hb_rx && p.hb_heard != std::chrono::steady_clock::time_point{} &&
        !op_active_.load(std::memory_order_acquire)) {
      // Between operations nobody may be reading (see end_operation): what arrived waits in
      // the socket. Read it here so a peer that keeps sending heartbeats counts as heard.
      for (auto& c : p.conns) {
        if (!c->closed && !c->eof) (void)drain_reads(p, *c);  // errors are recorded inside
      }
      if (failed_.load(std::memory_order_acquire)) return Status();
      rx = p.rx_count.load(std::memory_order_relaxed);
    }
    if (rx != p.hb_rx || p.hb_heard == std::chrono::steady_clock::time_point{}) {
      p.hb_rx = rx;
      p.hb_heard = now;
    } else if (now - p.hb_heard >= peer_timeout) {
      p.lost.store(true, std::memory_order_relaxed);
      const double silent = std::chrono::duration<double>(now - p.hb_heard).count();
      return Status(ErrorCode::peer_lost,
                    fmt::format("rank {}: rank {} is not responding: nothing arrived from it for "
                                "{:.1f} s (peer_timeout {:g} s; the process is stopped or frozen, "
                                "or its network is down)",
                                rank_, p.rank, silent,
                                std::chrono::duration<double>(peer_timeout).count()));
    }
    const uint64_t tx = p.tx_count.load(std::memory_order_relaxed);
    if (tx == p.hb_tx) {
      // Nothing went out since the last call: send a heartbeat from the reactor thread (a frozen
      // process sends none).
      Peer* target = &p;
      p.reactor->post([this, target] {
        Status st;
        {
          MutexLock lock(target->mu);
          Connection& c = *target->conns[0];
          if (c.closed) return;
          FrameHeader h;
          h.type = FrameType::heartbeat;
          h.comm = comm_;
          enqueue(*target, c, h, nullptr, nullptr);
          st = flush(*target, c);
        }
        if (!st.ok()) fail_async(st);
      });
    }
    p.hb_tx = tx;
  }
  return Status();
}

std::vector<int> TcpTransport::lost_peers() const {
  std::vector<int> out;
  for (const auto& p : peers_) {
    if (p->lost.load(std::memory_order_relaxed)) out.push_back(p->rank);
  }
  return out;
}

void TcpTransport::close_gracefully(std::chrono::milliseconds timeout) {
  log::debug("rank {}: close_gracefully (failed={})", rank_, failed_.load());
  if (failed_.load()) return;
  set_reactor_reads(true);  // the peers' GOODBYE and EOF arrive through the reactor
  int expected_goodbyes = 0;
  for (auto& p : peers_) {
    if (p->rank == rank_) continue;
    ++expected_goodbyes;
    Peer* peer = p.get();
    peer->reactor->run_sync([this, peer] {
      MutexLock lock(peer->mu);
      for (auto& c : peer->conns) {
        FrameHeader h;
        h.type = FrameType::goodbye;
        h.comm = comm_;
        enqueue(*peer, *c, h, nullptr, nullptr);
        Status st = flush(*peer, *c);
        if (st.ok() && c->outq.empty()) ::shutdown(c->fd.get(), SHUT_WR);
      }
    });
  }
  // Wait for every peer's GOODBYE + EOF, so no byte in flight is cut off by a reset.
  auto deadline = Completion::Clock::now() + timeout;
  while (goodbyes_.load() < expected_goodbyes && !failed_.load()) {
    uint32_t gen = closing_.generation();
    if (goodbyes_.load() >= expected_goodbyes || failed_.load()) break;
    // Half-closed sockets whose queue drained late get their FIN here.
    for (auto& p : peers_) {
      if (p->rank == rank_) continue;
      Peer* peer = p.get();
      peer->reactor->post([peer] {
        MutexLock lock(peer->mu);
        for (auto& c : peer->conns) {
          if (!c->closed && c->outq.empty()) ::shutdown(c->fd.get(), SHUT_WR);
        }
      });
    }
    if (!closing_.wait_for_change(gen, std::min(deadline, Completion::Clock::now() +
                                                              std::chrono::milliseconds(50)))) {
      if (Completion::Clock::now() >= deadline) break;
    }
  }
  log::debug("rank {}: closing with {} of {} goodbyes", rank_, goodbyes_.load(), expected_goodbyes);
  fail(Status(ErrorCode::aborted, fmt::format("rank {}: communicator shut down", rank_)));
}

Unexpected* TcpTransport::new_unexpected() {
  MutexLock lock(unexp_mu_);
  if (unexp_free_.empty()) {
    unexp_storage_.push_back(std::make_unique<Unexpected>());
    return unexp_storage_.back().get();
  }
  Unexpected* u = unexp_free_.back();
  unexp_free_.pop_back();
  *u = Unexpected();
  return u;
}

void TcpTransport::free_unexpected(Unexpected* u) {
  MutexLock lock(unexp_mu_);
  u->data = nullptr;
  unexp_free_.push_back(u);
}

}  // namespace weft::tcp

namespace weft {

Result<std::unique_ptr<Transport>> make_tcp_transport(const TcpTransportConfig& config, Store& store,
                                                      BufferPool& pool) {
  tcp::MeshConfig mesh;
  mesh.rank = config.rank;
  mesh.size = config.size;
  mesh.sockets_per_peer = config.options.sockets_per_peer;
  mesh.token = config.token;
  mesh.host_id = config.host_id;
  mesh.interface = config.options.interface;
  mesh.deadline = std::chrono::steady_clock::now() + config.options.connect_timeout;
  mesh.stranger_timeout = config.stranger_timeout;
  mesh.security = config.security;
  mesh.job_key = config.job_key;
  auto connected = tcp::connect_mesh(store, mesh);
  if (!connected.ok()) return connected.status();
  auto t = std::make_unique<tcp::TcpTransport>(config, pool);
  // Polling sockets before sleeping only pays when every rank of this host has a core to itself.
  t->set_spin(connected->local_ranks <= usable_cpus());
  WEFT_RETURN_IF_ERROR(t->start(std::move(connected->sockets), std::move(connected->crypto)));
  return std::unique_ptr<Transport>(std::move(t));
}

void close_tcp_transport(Transport& transport, std::chrono::milliseconds timeout) {
  static_cast<tcp::TcpTransport&>(transport).close_gracefully(timeout);
}

}  // namespace weft
