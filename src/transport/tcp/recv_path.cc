// The receive side of the TCP transport, run on the reactor thread that owns the peer: parse
// frames, match them to posted receives, and read payloads straight into the destination.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

#include <fmt/format.h>

#include "base/log.h"
#include "security/primitives.h"
#include "transport/tcp/transport_impl.h"

namespace weft::tcp {
namespace {

using security::kTagBytes;

constexpr size_t kInbufBytes = 64 * 1024;
static_assert(security::sealed_size(kHeaderBytes + kInlinePayloadMax) <= kInbufBytes,
              "a header record with an inline payload must fit the receive buffer");
// How long a waiting caller polls its peer's sockets before it sleeps in poll().
constexpr auto kReadSpin = std::chrono::microseconds(30);
constexpr auto kYieldSpin = std::chrono::microseconds(200);

bool is_collective(uint64_t tag) { return (tag & kP2pTagBit) == 0; }

}  // namespace

void TcpTransport::on_event(Peer& p, Connection& c, uint32_t events) {
  if (c.closed) return;
  if (events & EPOLLOUT) {
    Status st;
    {
      MutexLock lock(p.mu);
      st = flush(p, c);
    }
    if (!st.ok()) {
      fail_async(st);
      return;
    }
  }
  if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) && !c.eof) {
    // A waiting caller reads this peer itself; `missed` (set first) makes it drain once more
    // when it stops, so readiness seen only here is never lost.
    c.missed.store(true, std::memory_order_seq_cst);
    if (p.caller_reading.load(std::memory_order_seq_cst)) return;
    c.missed.store(false, std::memory_order_relaxed);
    (void)drain_reads(p, c);  // errors are recorded inside
  }
}

Status TcpTransport::drain_reads(Peer& p, Connection& c) {
  MutexLock lock(c.read_mu);
  bool again = true;
  while (again && !c.closed && !c.eof) {
    Status st = read_some(p, c, again);
    if (!st.ok()) {
      // Record it before anyone reads further: an error frame must win over the EOF behind it.
      fail_async(st);
      return st;
    }
  }
  return Status();
}

bool TcpTransport::wait(Completion& completion, uint32_t seen, const Request* hint,
                        Completion::Clock::time_point deadline) {
  if (!op_active_.load(std::memory_order_acquire) || op_thread_ != std::this_thread::get_id() ||
      failed_.load(std::memory_order_acquire)) {
    return completion.wait_for_change(seen, deadline);
  }
  // This thread owns the receive side of every socket (begin_operation): read what the hint's
  // peer sent and whatever the reactor saw arrive, poll briefly, then sleep in poll() on all.
  Peer* hinted = hint != nullptr && hint->peer != rank_ && hint->peer != kAnyPeer
                     ? peers_[hint->peer].get()
                     : nullptr;
  // With a core per rank, poll the sockets busily for a short while; with more ranks than cores,
  // poll them between sched_yield() calls for a little longer, which lets the peer that must
  // answer run on this core and still beats a sleep and wake-up.
  const auto spin_until = Completion::Clock::now() + (spin_ ? kReadSpin : kYieldSpin);
  std::vector<pollfd>& fds = poll_fds_;
  while (true) {
    if (hinted != nullptr) {
      for (auto& c : hinted->conns) {
        c->missed.store(false, std::memory_order_relaxed);
        if (!drain_reads(*hinted, *c).ok()) return true;  // failed: every request is ending
      }
    }
    for (auto& p : peers_) {
      for (auto& c : p->conns) {
        if (c->missed.exchange(false, std::memory_order_acq_rel) && !drain_reads(*p, *c).ok()) {
          return true;
        }
      }
    }
    if (!flush_blocked()) return true;
    if (completion.generation() != seen) return true;
    auto now = Completion::Clock::now();
    if (now >= deadline) return false;
    if (failed_.load(std::memory_order_acquire)) return completion.wait_for_change(seen, deadline);
    if (now < spin_until && hinted != nullptr) {
      if (!spin_) sched_yield();
      continue;
    }

    fds.clear();
    poll_conns_.clear();
    for (auto& p : peers_) {
      for (auto& c : p->conns) {
        if (c->closed) continue;
        short events = c->out_blocked.load(std::memory_order_acquire) ? POLLOUT : 0;
        if (!c->eof) events |= POLLIN;
        if (events == 0) continue;
        fds.push_back({c->fd.get(), events, 0});
        poll_conns_.push_back(c.get());
      }
    }
    if (fds.empty()) return completion.wait_for_change(seen, deadline);
    fds.push_back({wake_.get(), POLLIN, 0});
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    int ms = static_cast<int>(std::clamp<int64_t>(left + 1, 1, 50));
    // Completions by other threads write the eventfd only while this thread sleeps in poll().
    completion.set_poll_fd(wake_.get());
    if (completion.generation() == seen) ::poll(fds.data(), fds.size(), ms);
    completion.set_poll_fd(-1);
    if (fds.back().revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_.get(), &v, sizeof(v));
    }
    // Readable (or failed) sockets are read at the top of the loop; writable ones are flushed
    // there anyway.
    for (size_t i = 0; i < poll_conns_.size(); ++i) {
      if ((fds[i].revents & ~POLLOUT) != 0) poll_conns_[i]->missed.store(true, std::memory_order_relaxed);
    }
  }
}

Status TcpTransport::read_some(Peer& p, Connection& c, bool& again) {
  if (c.inbuf.empty()) c.inbuf.resize(kInbufBytes);
  if (c.in_start == c.in_end) c.in_start = c.in_end = 0;
  iovec iov[2];
  int n = 0;
  size_t direct = 0;
  if (c.state == Connection::RecvState::payload && c.in_start == c.in_end && c.remaining > 0) {
    iov[n++] = {c.target, c.remaining};  // large payload: no intermediate copy
    direct = c.remaining;
  }
  if (c.in_end == c.inbuf.size()) {
    // Compact the partial frame header to the front.
    std::memmove(c.inbuf.data(), c.inbuf.data() + c.in_start, c.in_end - c.in_start);
    c.in_end -= c.in_start;
    c.in_start = 0;
  }
  iov[n++] = {c.inbuf.data() + c.in_end, c.inbuf.size() - c.in_end};
  const size_t capacity = direct + (c.inbuf.size() - c.in_end);
  ssize_t r = ::readv(c.fd.get(), iov, n);
  if (r < 0) {
    again = false;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      again = errno == EINTR;
      return Status();
    }
    if (!p.reported.load(std::memory_order_relaxed)) p.lost.store(true, std::memory_order_relaxed);
    return Status(ErrorCode::peer_lost, fmt::format("rank {}: connection to rank {} lost ({})",
                                                    rank_, p.rank, std::strerror(errno)));
  }
  if (r == 0) {
    again = false;
    c.eof = true;
    MutexLock lock(p.mu);
    if (!p.departed) {
      log::debug("rank {}: EOF from rank {} socket {} state={} buffered={} remaining={} type={}",
                 rank_, p.rank, c.index, static_cast<int>(c.state), c.in_end - c.in_start,
                 c.remaining, static_cast<int>(c.cur.type));
      if (!p.reported.load(std::memory_order_relaxed)) p.lost.store(true, std::memory_order_relaxed);
      return Status(ErrorCode::peer_lost,
                    fmt::format("rank {}: connection to rank {} lost (peer closed it or died)",
                                rank_, p.rank));
    }
    if (++p.eof_count == static_cast<int>(p.conns.size())) {
      p.open_conns = false;
      goodbyes_.fetch_add(1);
      closing_.notify();
      if (p.queues.posted_count() != 0 || !p.expected.empty() || !p.rts_pending.empty()) {
        return Status(ErrorCode::peer_lost,
                      fmt::format("rank {}: rank {} shut down while operations with it were pending",
                                  rank_, p.rank));
      }
    }
    return Status();
  }
  // Liveness for heartbeat(): any arrival counts (a lost increment between two readers is fine,
  // only a change is looked for).
  p.rx_count.store(p.rx_count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  size_t got = static_cast<size_t>(r);
  // A short read emptied the socket: a later arrival raises a new edge, so no extra read that
  // would only say EAGAIN.
  again = got == capacity;
  if (direct > 0) {
    size_t into_target = std::min(got, direct);
    c.target += into_target;
    c.remaining -= into_target;
    got -= into_target;
    if (c.remaining == 0) WEFT_RETURN_IF_ERROR(payload_received(p, c));
  }
  c.in_end += got;
  return process(p, c);
}

Status TcpTransport::process(Peer& p, Connection& c) {
  while (!c.closed) {
    size_t avail = c.in_end - c.in_start;
    switch (c.state) {
      case Connection::RecvState::header: {
        const uint8_t* bytes = nullptr;
        size_t body = kHeaderBytes;
        if (!secure_) {
          if (avail < kHeaderBytes) return Status();
          bytes = c.inbuf.data() + c.in_start;
          c.in_start += kHeaderBytes;
        } else {
          auto opened = open_header_record(p, c);
          if (!opened.ok()) return opened.status();
          if (opened.value() == 0) return Status();
          // Authenticated: the header (and an inline payload) is the record's body, just
          // before its tag (in_start has moved past the record).
          body = opened.value();
          bytes = c.inbuf.data() + c.in_start - kTagBytes - body;
        }
        auto h = decode_header(bytes, limits_);
        if (!h.ok()) {
          return Status(ErrorCode::protocol, fmt::format("rank {}: from rank {}: {}", rank_,
                                                         p.rank, h.status().message()));
        }
        if (h->comm != comm_) {
          return Status(ErrorCode::protocol,
                        fmt::format("rank {}: frame from rank {} belongs to another communicator",
                                    rank_, p.rank));
        }
        const bool inline_payload = secure_ && payload_inline(h->length);
        if (secure_ && body != kHeaderBytes + (inline_payload ? h->length : 0)) {
          return record_error(p, c, Status(ErrorCode::protocol,
                                           fmt::format("a header record of {} bytes for a frame "
                                                       "with a payload of {}",
                                                       body, h->length)));
        }
        c.cur = h.value();
        WEFT_RETURN_IF_ERROR(on_header(p, c));
        if (inline_payload && c.remaining > 0) {
          // The payload was in the record just opened: to its destination, as the clear
          // path's payload state does, and the frame is done.
          if (c.target != nullptr) std::memcpy(c.target, bytes + kHeaderBytes, c.remaining);
          c.target += c.remaining;
          c.remaining = 0;
          c.state = Connection::RecvState::header;
          WEFT_RETURN_IF_ERROR(on_payload_done(p, c));
        }
        continue;
      }
      case Connection::RecvState::payload_record: {
        if (avail < security::kRecordHeaderBytes) return Status();
        std::memcpy(c.record_header, c.inbuf.data() + c.in_start, security::kRecordHeaderBytes);
        c.in_start += security::kRecordHeaderBytes;
        auto body = c.opener->body_size(std::span<const uint8_t, security::kRecordHeaderBytes>(
            c.record_header));
        if (!body.ok()) return record_error(p, c, body.status());
        if (body.value() != c.remaining || c.target == nullptr) {
          return record_error(p, c, Status(ErrorCode::protocol,
                                           fmt::format("a payload record of {} bytes for a frame "
                                                       "of {}", body.value(), c.remaining)));
        }
        c.body = c.target;  // decrypted in place there once the tag is in
        c.state = Connection::RecvState::payload;
        continue;
      }
      case Connection::RecvState::payload: {
        if (avail == 0) return Status();
        size_t take = std::min(avail, c.remaining);
        if (c.target != nullptr) std::memcpy(c.target, c.inbuf.data() + c.in_start, take);
        c.target += take;
        c.remaining -= take;
        c.in_start += take;
        if (c.remaining > 0) return Status();
        WEFT_RETURN_IF_ERROR(payload_received(p, c));
        continue;
      }
      case Connection::RecvState::payload_tag: {
        if (avail < kTagBytes) return Status();
        const uint8_t* tag = c.inbuf.data() + c.in_start;
        c.in_start += kTagBytes;
        Status st = c.opener->open(
            std::span<const uint8_t, security::kRecordHeaderBytes>(c.record_header),
            std::span<uint8_t>(c.body, c.cur.length), std::span<const uint8_t, kTagBytes>(tag,
                                                                                    kTagBytes));
        if (!st.ok()) return record_error(p, c, st);
        c.state = Connection::RecvState::header;
        WEFT_RETURN_IF_ERROR(on_payload_done(p, c));
        continue;
      }
    }
  }
  return Status();
}

Status TcpTransport::payload_received(Peer& p, Connection& c) {
  if (secure_) {
    c.state = Connection::RecvState::payload_tag;
    return Status();
  }
  c.state = Connection::RecvState::header;
  return on_payload_done(p, c);
}

Result<size_t> TcpTransport::open_header_record(Peer& p, Connection& c) {
  if (c.in_end - c.in_start < security::kRecordHeaderBytes) return size_t{0};
  uint8_t* record = c.inbuf.data() + c.in_start;
  auto body = c.opener->body_size(
      std::span<const uint8_t, security::kRecordHeaderBytes>(record, security::kRecordHeaderBytes));
  if (!body.ok()) return record_error(p, c, body.status());
  if (body.value() < kHeaderBytes || body.value() > kHeaderBytes + kInlinePayloadMax) {
    return record_error(p, c, Status(ErrorCode::protocol,
                                     fmt::format("a record of {} bytes where a frame header "
                                                 "was expected", body.value())));
  }
  const size_t length = security::sealed_size(body.value());
  if (c.in_end - c.in_start < length) return size_t{0};
  auto opened = c.opener->open(std::span<uint8_t>(record, length));
  if (!opened.ok()) return record_error(p, c, opened.status());
  c.in_start += length;
  return body.value();
}

Status TcpTransport::record_error(const Peer& p, const Connection& c, const Status& st) const {
  return Status(ErrorCode::protocol, fmt::format("rank {}: from rank {} (socket {}): {}", rank_,
                                                 p.rank, c.index, st.message()));
}

Status TcpTransport::check_collective(Peer& p, const FrameHeader& h) {
  if (!is_collective(h.tag)) return Status();
  return collective_mismatch(rank_, current_, p.rank, h.fp);
}

Status TcpTransport::match_check(Peer& p, const Request& r, uint64_t bytes,
                                 const Fingerprint& remote) {
  return receive_mismatch(rank_, r, p.rank, bytes, remote);
}

Status TcpTransport::on_header(Peer& p, Connection& c) {
  const FrameHeader& h = c.cur;
  c.target = nullptr;
  c.cur_req = nullptr;
  c.cur_unexp = nullptr;
  c.remaining = h.length;
  switch (h.type) {
    case FrameType::hello:
      return Status(ErrorCode::protocol,
                    fmt::format("rank {}: unexpected HELLO from rank {}", rank_, p.rank));
    case FrameType::eager:
    case FrameType::rts: {
      // fp_mu_ from the check until the message is parked or matched: begin_operation (which
      // holds it while it installs the next operation and checks what is parked) then sees the
      // message parked, or this check sees the new operation. Released between the two, a
      // message of an earlier operation could be checked against the old one and parked after
      // begin_operation looked, and its mismatch would only show as a timeout.
      MutexLock fp_lock(fp_mu_);
      WEFT_RETURN_IF_ERROR(check_collective(p, h));
      uint64_t bytes = h.type == FrameType::eager ? h.length : h.offset;
      MutexLock lock(p.mu);
      if (Request* r = p.queues.take_posted(h.tag)) {
        Status st = match_check(p, *r, bytes, h.fp);
        if (!st.ok()) {
          r->complete(st);
          return st;
        }
        if (h.type == FrameType::eager) {
          c.cur_req = r;
          c.target = static_cast<uint8_t*>(r->buf);
        } else {
          r->msg_id = h.msg_id;
          r->progress = 0;
          p.expected.push_back(r);
          send_cts(p, h.msg_id);
          return flush(p, *p.conns[0]);
        }
      } else {
        // Eager payloads wait in staging memory (sockets only: there is no self connection).
        const bool eager = h.type == FrameType::eager;
        if (eager) {
          // An honest sender spends credits we granted and gets them back only once we consumed
          // its messages, so what it parks here stays within the credit.
          const uint64_t staged = p.queues.staged_bytes() + bytes;
          if (staged > options_.eager_credit_bytes) {
            return Status(ErrorCode::protocol,
                          fmt::format("rank {}: rank {} sent {} bytes of eager messages ahead of "
                                      "their receives, beyond its {}-byte credit",
                                      rank_, p.rank, staged, options_.eager_credit_bytes));
          }
        }
        Unexpected* u = new_unexpected();
        u->type = h.type;
        u->bytes = bytes;
        u->msg_id = h.msg_id;
        if (eager) {
          u->data = bytes > 0 ? static_cast<uint8_t*>(pool_.acquire(bytes)) : nullptr;
          c.cur_unexp = u;
          c.target = u->data;
        }
        p.queues.park({.tag = h.tag, .fp = h.fp, .bytes = bytes, .staged = eager ? bytes : 0,
                       .arrival = u});
        if (!eager) return Status();
      }
      break;
    }
    case FrameType::cts: {
      MutexLock lock(p.mu);
      auto it = std::find_if(p.rts_pending.begin(), p.rts_pending.end(),
                             [&](Request* r) { return r->msg_id == h.msg_id; });
      if (it == p.rts_pending.end()) {
        return Status(ErrorCode::protocol, fmt::format("rank {}: CTS from rank {} for unknown "
                                                       "message {}", rank_, p.rank, h.msg_id));
      }
      Request* r = *it;
      p.rts_pending.erase(it);
      start_data(p, r);
      for (auto& conn : p.conns) WEFT_RETURN_IF_ERROR(flush(p, *conn));
      return Status();
    }
    case FrameType::data: {
      MutexLock lock(p.mu);
      auto it = std::find_if(p.expected.begin(), p.expected.end(),
                             [&](Request* r) { return r->msg_id == h.msg_id; });
      if (it == p.expected.end() || h.offset + h.length > (*it)->bytes) {
        return Status(ErrorCode::protocol, fmt::format("rank {}: DATA from rank {} for unknown "
                                                       "message {} or out of its bounds",
                                                       rank_, p.rank, h.msg_id));
      }
      c.cur_req = *it;
      c.target = static_cast<uint8_t*>(c.cur_req->buf) + h.offset;
      break;
    }
    case FrameType::credit: {
      MutexLock lock(p.mu);
      p.send_credits += h.msg_id;
      return Status();
    }
    case FrameType::error:
      c.err_text.assign(h.length, '\0');
      c.target = reinterpret_cast<uint8_t*>(c.err_text.data());
      break;
    case FrameType::goodbye: {
      MutexLock lock(p.mu);
      p.departed = true;
      return Status();
    }
    case FrameType::heartbeat:
      return Status();  // counted as arrival in read_some like every other byte
  }
  if (c.remaining > 0) {
    c.state = secure_ ? Connection::RecvState::payload_record : Connection::RecvState::payload;
    return Status();
  }
  return on_payload_done(p, c);
}

Status TcpTransport::on_payload_done(Peer& p, Connection& c) {
  const FrameHeader& h = c.cur;
  switch (h.type) {
    case FrameType::eager: {
      MutexLock lock(p.mu);
      if (c.cur_req != nullptr) {
        p.credits_to_return += h.length;
        c.cur_req->complete(Status());
      } else if (c.cur_unexp != nullptr) {
        Unexpected* u = c.cur_unexp;
        u->arrived = true;
        if (u->waiting != nullptr) {
          p.queues.release_staged(u->bytes);  // held by match_unexpected while it arrived
          deliver_unexpected(p, u, u->waiting);
        }
      }
      c.cur_req = nullptr;
      c.cur_unexp = nullptr;
      maybe_return_credits(p);
      return flush(p, *p.conns[0]);
    }
    case FrameType::data: {
      MutexLock lock(p.mu);
      Request* r = c.cur_req;
      c.cur_req = nullptr;
      r->progress += h.length;
      if (r->progress == r->bytes) {
        p.expected.erase(std::find(p.expected.begin(), p.expected.end(), r));
        r->complete(Status());
      }
      return Status();
    }
    case FrameType::error: {
      p.reported.store(true, std::memory_order_relaxed);
      uint64_t code = h.offset;
      if (code == 0 || code > static_cast<uint64_t>(kMaxErrorCode)) {
        code = static_cast<uint64_t>(ErrorCode::internal);
      }
      return Status(static_cast<ErrorCode>(code),
                    fmt::format("rank {} reports: {}", p.rank, log::printable(c.err_text)));
    }
    default:
      return Status();
  }
}

// p.mu held. Copies a parked eager message into the receive, or answers a parked RTS.
void TcpTransport::deliver_unexpected(Peer& p, Unexpected* u, Request* r) {
  if (u->type == FrameType::rts) {
    r->msg_id = u->msg_id;
    r->progress = 0;
    p.expected.push_back(r);
    send_cts(p, u->msg_id);
    free_unexpected(u);
    return;
  }
  if (!u->arrived) {
    u->waiting = r;  // completes when the payload is in
    return;
  }
  if (u->bytes > 0) std::memcpy(r->buf, u->data, u->bytes);
  if (!is_self(p)) p.credits_to_return += u->bytes;
  if (u->data != nullptr) pool_.release(u->data, u->bytes);
  free_unexpected(u);
  r->complete(Status());
  if (!is_self(p)) maybe_return_credits(p);
}

void TcpTransport::post_recv(Request* r) {
  if ((r->tag & kP2pTagBit) != 0) note_p2p();
  if (failed_.load(std::memory_order_acquire)) {
    r->complete(failure());
    return;
  }
  if (r->peer == kAnyPeer) {
    post_recv_any(r);
    return;
  }
  Peer& p = *peers_[r->peer];
  Status st;
  {
    MutexLock lock(p.mu);
    if (failed_.load(std::memory_order_acquire)) {
      r->complete(failure());
      return;
    }
    std::optional<TcpParked> a = p.queues.take_parked(r->tag);
    if (!a) {
      if (p.departed && !is_self(p)) {
        r->complete(Status(ErrorCode::peer_lost, fmt::format("rank {}: receive from rank {} which "
                                                             "has shut down", rank_, p.rank)));
        return;
      }
      p.queues.add_posted(r);
      return;
    }
    st = match_unexpected(p, r, std::move(*a));
  }
  if (!st.ok()) fail_async(st);
}

Status TcpTransport::match_unexpected(Peer& p, Request* r, TcpParked a) {
  Status st = match_check(p, *r, a.bytes, a.fp);
  if (!st.ok()) {
    // This receive's error, not the transport's: the message stays for a receive that agrees.
    p.queues.put_back(std::move(a));
    r->complete(st);
    return Status();
  }
  Unexpected* u = a.arrival;
  // An eager payload still arriving keeps its staging bytes counted until on_payload_done
  // delivers it (take_parked uncounted them).
  if (u->type == FrameType::eager && !u->arrived) p.queues.hold_staged(a.staged);
  deliver_unexpected(p, u, r);
  return is_self(p) ? Status() : flush(p, *p.conns[0]);
}

void TcpTransport::post_recv_any(Request* r) {
  Status st;
  const auto posted = matcher_.post_any(r, [&](PeerQueues<Unexpected*>& q, TcpParked&& a) {
    Peer& p = *peers_[static_cast<size_t>(q.peer())];
    p.mu.assert_held();  // post_any holds every peer's
    st = match_unexpected(p, r, std::move(a));
  });
  if (posted == TcpMatcher::AnyPost::closed) r->complete(failure());
  if (!st.ok()) fail_async(st);
}

}  // namespace weft::tcp
