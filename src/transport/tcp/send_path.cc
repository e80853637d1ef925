// The send side of the TCP transport: queueing frames and writing them with writev, straight
// from the caller's buffer.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/tcp/transport_impl.h"

namespace weft::tcp {
namespace {

constexpr size_t kMinSegment = 256 * 1024;  // smallest DATA segment worth its own socket
constexpr int kMaxIov = 64;
// Secured links: how many sealed bytes flush() prepares ahead of what the socket took.
constexpr size_t kSealAhead = size_t{8} << 20;

}  // namespace

void TcpTransport::enqueue(Peer& p, Connection& c, const FrameHeader& h, const void* payload,
                           Request* r) {
  (void)p;
  OutFrame& f = c.outq.emplace_back();
  encode_header(h, f.header);
  f.payload = static_cast<const uint8_t*>(payload);
  f.payload_len = h.length;
  f.req = r;
}

Status TcpTransport::seal_frame(Peer& p, Connection& c, OutFrame& f) {
  (void)p;
  Status st;
  if (payload_inline(f.payload_len)) {
    // One record, header || payload, gathered here (at most 4 KiB): one seal instead of two.
    uint8_t body[kHeaderBytes + kInlinePayloadMax];
    std::memcpy(body, f.header, kHeaderBytes);
    std::memcpy(body + kHeaderBytes, f.payload, f.payload_len);
    f.sealed_len = security::sealed_size(kHeaderBytes + f.payload_len);
    f.sealed = std::make_unique_for_overwrite<uint8_t[]>(f.sealed_len);
    st = c.sealer->seal(security::Bytes(body, kHeaderBytes + f.payload_len),
                        std::span<uint8_t>(f.sealed.get(), f.sealed_len));
  } else {
    const size_t header_record = security::sealed_size(kHeaderBytes);
    f.sealed_len = header_record + (f.payload_len > 0 ? security::sealed_size(f.payload_len) : 0);
    f.sealed = std::make_unique_for_overwrite<uint8_t[]>(f.sealed_len);
    // Read from the frame's header and the caller's buffer; written only to f.sealed.
    st = c.sealer->seal(security::Bytes(f.header, kHeaderBytes),
                        std::span<uint8_t>(f.sealed.get(), header_record));
    if (st.ok() && f.payload_len > 0) {
      st = c.sealer->seal(security::Bytes(f.payload, f.payload_len),
                          std::span<uint8_t>(f.sealed.get() + header_record,
                                             f.sealed_len - header_record));
    }
  }
  if (!st.ok()) {
    f.sealed.reset();
    return st.with_context(fmt::format("rank {}: sealing a frame to rank {}", rank_, c.peer));
  }
  return Status();
}

Status TcpTransport::flush(Peer& p, Connection& c) {
  if (c.closed || c.send_broken) return Status();
  while (!c.outq.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    size_t ahead = 0;
    for (auto it = c.outq.begin(); secure_ && it != c.outq.end() && n < kMaxIov; ++it) {
      // Sealed in queue order (the record counter is the order on the wire), a bounded amount
      // ahead of the socket.
      if (it->sealed == nullptr) {
        if (ahead >= kSealAhead) break;
        WEFT_RETURN_IF_ERROR(seal_frame(p, c, *it));
      }
      size_t skip = it == c.outq.begin() ? it->written : 0;
      iov[n++] = {it->sealed.get() + skip, it->sealed_len - skip};
      ahead += it->sealed_len - skip;
    }
    for (auto it = c.outq.begin(); !secure_ && it != c.outq.end() && n + 2 <= kMaxIov; ++it) {
      size_t skip = it == c.outq.begin() ? it->written : 0;
      if (skip < kHeaderBytes) {
        iov[n++] = {it->header + skip, kHeaderBytes - skip};
        skip = 0;
      } else {
        skip -= kHeaderBytes;
      }
      if (it->payload_len > skip) {
        iov[n++] = {const_cast<uint8_t*>(it->payload) + skip, it->payload_len - skip};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // While an operation's thread reads this peer it also finishes the queue (wait() polls
        // for room); otherwise ask the reactor to, once the socket has room again.
        if (p.caller_reading.load(std::memory_order_seq_cst)) {
          c.out_blocked.store(true, std::memory_order_release);
          return Status();
        }
        if (!c.want_out) {
          c.want_out = true;
          return p.reactor->modify(c.fd.get(), epoll_events(c));
        }
        return Status();
      }
      if (errno == EINTR) continue;
      Status lost(ErrorCode::peer_lost,
                  fmt::format("rank {}: connection to rank {} lost while sending ({})", rank_,
                              p.rank, std::strerror(errno)));
      if (errno == EPIPE || errno == ECONNRESET) {
        // The peer closed. What it sent before, typically the error that made it stop (a
        // mismatch it saw), may still wait in the receive buffer and must win over "lost": the
        // reactor reads it first (this thread holds the peer mutex, which reading takes), then
        // fails the transport with this error if the reads did not already.
        c.send_broken = true;
        Peer* peer = &p;
        Connection* conn = &c;
        p.reactor->post([this, peer, conn, lost] {
          if (!conn->closed && !conn->eof) (void)drain_reads(*peer, *conn);
          if (!peer->reported.load(std::memory_order_relaxed)) {
            peer->lost.store(true, std::memory_order_relaxed);
          }
          fail_async(lost);
        });
        return Status();
      }
      if (!p.reported.load(std::memory_order_relaxed)) p.lost.store(true, std::memory_order_relaxed);
      return lost;
    }
    p.tx_count.store(p.tx_count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    size_t left = static_cast<size_t>(w);
    while (left > 0) {
      OutFrame& f = c.outq.front();
      size_t total = secure_ ? f.sealed_len : kHeaderBytes + f.payload_len;
      size_t take = std::min(left, total - f.written);
      f.written += take;
      left -= take;
      if (f.written < total) break;
      Request* r = f.req;
      c.outq.pop_front();
      if (r != nullptr && --r->parts_left == 0) r->complete(Status());
    }
  }
  c.out_blocked.store(false, std::memory_order_relaxed);
  if (c.want_out) {
    c.want_out = false;
    return p.reactor->modify(c.fd.get(), epoll_events(c));
  }
  return Status();
}

bool TcpTransport::flush_blocked() {
  for (auto& p : peers_) {
    for (auto& c : p->conns) {
      if (!c->out_blocked.load(std::memory_order_acquire)) continue;
      Status st;
      {
        MutexLock lock(p->mu);
        st = flush(*p, *c);
      }
      if (!st.ok()) {
        fail_async(st);
        return false;
      }
    }
  }
  return true;
}

void TcpTransport::send_cts(Peer& p, uint64_t msg_id) {
  FrameHeader h;
  h.type = FrameType::cts;
  h.comm = comm_;
  h.msg_id = msg_id;
  enqueue(p, *p.conns[0], h, nullptr, nullptr);
}

void TcpTransport::start_data(Peer& p, Request* r) {
  size_t nconn = p.conns.size();
  size_t segments = std::max<size_t>(1, std::min(nconn, r->bytes / kMinSegment));
  size_t per = (r->bytes + segments - 1) / segments;
  per = (per + 4095) & ~size_t{4095};
  per = std::min<size_t>(per, max_frame_payload_);  // secured: one record per frame
  r->parts_left = 0;
  for (size_t off = 0, i = 0; off < r->bytes; off += per, ++i) r->parts_left++;
  const auto* base = static_cast<const uint8_t*>(r->buf);
  size_t i = 0;
  for (size_t off = 0; off < r->bytes; off += per, ++i) {
    FrameHeader h;
    h.type = FrameType::data;
    h.comm = comm_;
    h.tag = r->tag;
    h.msg_id = r->msg_id;
    h.offset = off;
    h.length = std::min(per, r->bytes - off);
    h.fp = r->fp;
    enqueue(p, *p.conns[i % nconn], h, base + off, r);
  }
}

void TcpTransport::maybe_return_credits(Peer& p) {
  if (p.credits_to_return == 0 || p.credits_to_return < options_.eager_credit_bytes / 4) return;
  FrameHeader h;
  h.type = FrameType::credit;
  h.comm = comm_;
  h.msg_id = p.credits_to_return;
  p.credits_to_return = 0;
  enqueue(p, *p.conns[0], h, nullptr, nullptr);
}

void TcpTransport::send_self(Peer& p, Request* r) {
  // p.mu held. A send to oneself matches like any other message, without a socket.
  if (Request* recv = p.queues.take_posted(r->tag)) {
    Status st = match_check(p, *recv, r->bytes, r->fp);
    if (st.ok() && r->bytes > 0) std::memcpy(recv->buf, r->buf, r->bytes);
    recv->complete(st);
    r->complete(st);
    return;
  }
  Unexpected* u = new_unexpected();
  u->type = FrameType::eager;
  u->bytes = r->bytes;
  u->data = r->bytes > 0 ? static_cast<uint8_t*>(pool_.acquire(r->bytes)) : nullptr;
  if (r->bytes > 0) std::memcpy(u->data, r->buf, r->bytes);
  u->arrived = true;
  // A copy of the caller's buffer, not bytes a peer staged against its credit: staged 0.
  p.queues.park({.tag = r->tag, .fp = r->fp, .bytes = r->bytes, .arrival = u});
  r->complete(Status());
}

void TcpTransport::post_send(Request* r) {
  if ((r->tag & kP2pTagBit) != 0) note_p2p();
  if (failed_.load(std::memory_order_acquire)) {
    r->complete(failure());
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
    if (is_self(p)) {
      send_self(p, r);
      return;
    }
    if (p.departed) {
      r->complete(Status(ErrorCode::peer_lost,
                         fmt::format("rank {}: send to rank {} which has shut down", rank_, p.rank)));
      return;
    }
    FrameHeader h;
    h.comm = comm_;
    h.tag = r->tag;
    h.fp = r->fp;
    if (r->bytes <= options_.eager_threshold && r->bytes <= p.send_credits &&
        r->bytes <= max_frame_payload_) {
      p.send_credits -= r->bytes;
      h.type = FrameType::eager;
      h.length = r->bytes;
      r->parts_left = 1;
      enqueue(p, *p.conns[0], h, r->buf, r);
    } else {
      h.type = FrameType::rts;
      r->msg_id = ++p.next_msg_id;
      h.msg_id = r->msg_id;
      h.offset = r->bytes;
      p.rts_pending.push_back(r);
      enqueue(p, *p.conns[0], h, nullptr, nullptr);
    }
    st = flush(p, *p.conns[0]);
  }
  if (!st.ok()) fail_async(st);
}

}  // namespace weft::tcp
