// The send side of the shared-memory transport: posting sends (eager within credits, else an RTS
// and, after the CTS, DATA chunks), sends to this rank itself, credits, writing a peer's ring.
#include <algorithm>
#include <cstring>

#include "runtime/buffer_pool.h"
#include "transport/shm/shm_transport_impl.h"

namespace weft::shm {
namespace {

constexpr size_t kMinChunk = 4096;  // smaller pieces wait for room instead

}  // namespace

void ShmTransport::post_send(Request* r) {
  if (is_p2p(r->tag)) note_p2p();
  const int index = index_of(r->peer);
  if (index < 0) return r->complete(not_here(r->peer));
  if (index == rank_) return send_self(r);
  Peer& p = *peers_[static_cast<size_t>(index)];
  Status st;
  int moved = 0;
  {
    MutexLock lock(p.mu);
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
    MutexLock lock(p.mu);
    if (failed_.load(std::memory_order_acquire)) {
      r->complete(failure());
      return;
    }
    if (Request* recv = p.queues.take_posted(r->tag)) {
      st = match_check(p, *recv, r->bytes, r->fp);
      if (st.ok() && r->bytes > 0) std::memcpy(recv->buf, r->buf, r->bytes);
      complete(recv, st);
    } else {
      ShmParked a{.tag = r->tag, .fp = r->fp, .bytes = r->bytes};
      if (r->bytes > 0) {
        a.arrival.data = static_cast<uint8_t*>(pool_.acquire(r->bytes));
        std::memcpy(a.arrival.data, r->buf, r->bytes);
      }
      p.queues.park(std::move(a));
    }
  }
  complete(r, Status());
}

void ShmTransport::return_credits(Peer& p, size_t bytes) {
  p.credits_to_return += bytes;
  if (p.credits_to_return > 0 && p.credits_to_return >= options_.eager_credit_bytes / 4) {
    p.outq.push_back(OutRec{RecordType::credit, nullptr, p.credits_to_return});
    p.credits_to_return = 0;
  }
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

}  // namespace weft::shm
