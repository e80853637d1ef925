// The receive side of the shared-memory transport: posting receives, tag matching (posted receives
// against parked arrivals), reading the rings and acting on their records, large-message receipt.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/log.h"
#include "runtime/buffer_pool.h"
#include "transport/shm/shm_transport_impl.h"

namespace weft::shm {
namespace {

constexpr size_t kCmaPiece = 1 << 20;  // largest process_vm_readv of a message read in place

}  // namespace

void ShmTransport::post_recv(Request* r) {
  if (is_p2p(r->tag)) note_p2p();
  if (r->peer == kAnyPeer) return post_recv_any(r);
  const int index = index_of(r->peer);
  if (index < 0) return r->complete(not_here(r->peer));
  Peer& p = *peers_[static_cast<size_t>(index)];
  Status st;
  {
    MutexLock lock(p.mu);
    if (failed_.load(std::memory_order_acquire)) {
      r->complete(failure());
      return;
    }
    if (std::optional<ShmParked> a = p.queues.post(r)) {
      st = match_unexpected(p, r, std::move(*a));
      int moved = 0;
      if (st.ok()) st = flush(p, moved);  // a CTS, an acknowledged read or credits
    }
  }
  if (!st.ok()) fail(st);
}

void ShmTransport::post_recv_any(Request* r) {
  if (failed_.load(std::memory_order_acquire)) {
    r->complete(failure());
    return;
  }
  Status st;
  const auto posted = matcher_.post_any(r, [&](PeerQueues<Unexpected>& q, ShmParked&& a) {
    Peer& p = *peers_[static_cast<size_t>(index_of(q.peer()))];
    p.mu.assert_held();  // post_any holds every peer's
    st = match_unexpected(p, r, std::move(a));
    int moved = 0;
    if (st.ok()) st = flush(p, moved);
  });
  if (posted == ShmMatcher::AnyPost::closed) r->complete(failure());
  if (!st.ok()) fail(st);
}

Status ShmTransport::match_unexpected(Peer& p, Request* r, ShmParked a) {
  Status st = match_check(p, *r, a.bytes, a.fp);
  const Unexpected& u = a.arrival;
  if (u.type == RecordType::eager) {
    if (st.ok() && a.bytes > 0) std::memcpy(r->buf, u.data, a.bytes);
    pool_.release(u.data, a.bytes);
    if (p.rank != rank_) return_credits(p, a.bytes);
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

Status ShmTransport::check_collective(const Peer& p, uint64_t tag, const Fingerprint& fp) {
  if (is_p2p(tag)) return Status();
  return collective_mismatch(name_, current_.load(), p.name, fp);
}

Status ShmTransport::parked_mismatch() {
  if (matcher_.parked_collectives() == 0) return Status();
  const Fingerprint current = current_.load();
  if (current.seq == 0) return Status();
  for (auto& p : peers_) {
    MutexLock lock(p->mu);
    WEFT_RETURN_IF_ERROR(p->queues.check_parked(name_, current));
  }
  return Status();
}

Status ShmTransport::match_check(const Peer& p, const Request& r, uint64_t bytes,
                                 const Fingerprint& remote) {
  return receive_mismatch(name_, r, p.name, bytes, remote);
}

int ShmTransport::progress_all() {
  if (failed_.load(std::memory_order_acquire)) return 0;
  int moved = 0;
  for (auto& peer : peers_) {
    Peer& p = *peer;
    if (p.rank == rank_) continue;
    MutexUniqueLock lock(p.mu, std::defer_lock);
    if (!lock.try_lock()) {
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
    return Status(static_cast<ErrorCode>(code), fmt::format("rank {} reports: {}", p.name, log::printable(text)));
  }
  // Departed or gone: what it wrote before is still in the ring; read it first.
  if (p.in_ctl->tail.load(std::memory_order_acquire) != p.in_head) return Status();
  if (state == kDeparted) {
    const bool sends = std::any_of(p.outq.begin(), p.outq.end(),
                                   [](const OutRec& o) { return o.req != nullptr; });
    if (p.queues.posted_count() != 0 || !p.expected.empty() || !p.rts_pending.empty() || sends) {
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
      Request* r = p.queues.take_posted(rec.tag);
      if (r == nullptr) {
        ShmParked a{.tag = rec.tag, .fp = fp, .bytes = rec.bytes};
        a.arrival = Unexpected{type, rec.msg_id, nullptr, type == RecordType::rts ? rec.offset : 0};
        if (type == RecordType::eager && rec.len > 0) {
          a.arrival.data = static_cast<uint8_t*>(pool_.acquire(rec.len));
          std::memcpy(a.arrival.data, payload, rec.len);
        }
        p.queues.park(std::move(a));
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

}  // namespace weft::shm
