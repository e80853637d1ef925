#include "transport/local/local_transport.h"

#include <fmt/format.h>

#include "base/mutex.h"
#include "runtime/buffer_pool.h"
#include "transport/matching.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace weft {
namespace {

// Returns an eager copy to the fabric's pool (fresh pages would cost a fault per 4 KiB).
struct PoolDeleter {
  BufferPool* pool = nullptr;
  size_t bytes = 0;
  void operator()(std::byte* p) const { pool->release(p, bytes); }
};

// A message that arrived before its receive (its tag, fingerprint and size are in the Parked
// record the matching engine keeps it in).
struct Envelope {
  std::unique_ptr<std::byte, PoolDeleter> data;  // eager: an owned copy; the send is complete
  Request* send = nullptr;            // rendezvous: the sender's request, completed on match
  bool lost = false;  // a rendezvous whose sender failed: kept so its fingerprint is still checked
  const void* payload() const { return send != nullptr ? send->buf : data.get(); }
};
using Parcel = Parked<Envelope>;

bool is_collective(const Fingerprint& fp) {
  return fp.kind != OpKind::send && fp.kind != OpKind::recv;
}

// Everything addressed to one rank, guarded by mu: one PeerQueues per sender (receives posted
// for it, its messages that arrived first), all under this one lock.
struct Mailbox {
  Mutex mu;
  Matcher<Envelope> matcher;
  // By sender; built once (the matcher holds addresses).
  std::vector<PeerQueues<Envelope>> from GUARDED_BY(mu);
  // The operation begin_operation announced, and the mismatch found against it (the text after
  // "rank N: "; empty when none).
  bool has_op GUARDED_BY(mu) = false;
  Fingerprint op GUARDED_BY(mu);
  std::string op_mismatch GUARDED_BY(mu);
};

// Lock order: one Mailbox::mu, then any RankState::state_mu; never two mailboxes at once.
struct RankState {
  Mailbox box;
  std::atomic<bool> failed{false};
  mutable Mutex state_mu;  // leaf lock, guards the two fields below
  Status error GUARDED_BY(state_mu);  // the first error passed to fail()
  // The current operation (a copy of box.op, readable by peers).
  std::optional<Fingerprint> op GUARDED_BY(state_mu);

  Status first_error() const EXCLUDES(state_mu) {
    MutexLock lock(state_mu);
    return error;
  }
  std::optional<Fingerprint> current_op() const EXCLUDES(state_mu) {
    MutexLock lock(state_mu);
    return op;
  }
};

struct Fabric {
  Fabric(int n, LocalTransportOptions o) : options(o), ranks(static_cast<size_t>(n)) {
    for (RankState& r : ranks) {
      MutexLock lock(r.box.mu);  // nobody else sees the fabric yet; for the analysis
      r.box.from.reserve(static_cast<size_t>(n));
      for (int sender = 0; sender < n; ++sender) {
        r.box.from.emplace_back(r.box.matcher, sender);
        r.box.matcher.add_peer(r.box.mu, r.box.from.back());
      }
    }
  }
  const LocalTransportOptions options;
  BufferPool pool{/*max_per_class=*/64};  // eager copies; declared before ranks, outlives them
  std::deque<RankState> ranks;            // deque: RankState is not movable
};

std::string mismatch_body(int sender, const Fingerprint& sfp, size_t sbytes, int receiver,
                          const Fingerprint& rfp, size_t rbytes) {
  if (!fingerprints_compatible(sfp, rfp)) {
    return fmt::format("rank {} called {} but rank {} called {}", sender, sfp.describe(),
                       receiver, rfp.describe());
  }
  return fmt::format("rank {} sent {} bytes in {} but rank {} expected {} bytes", sender, sbytes,
                     sfp.describe(), receiver, rbytes);
}

Status mismatch_for(int rank, const std::string& body) {
  return Status(ErrorCode::mismatch, fmt::format("rank {}: {}", rank, body));
}

// Under box.mu: records a mismatch against operation `seq` of the mailbox's owner and ends the
// owner's receives for it, so the owner learns of the mismatch itself rather than from a peer
// that stopped.
void note_mismatch(Mailbox& box, int owner, uint64_t seq, const std::string& body)
    REQUIRES(box.mu) {
  if (!box.has_op || box.op.seq != seq || !box.op_mismatch.empty()) return;
  box.op_mismatch = body;
  const Status s = mismatch_for(owner, body);
  for (PeerQueues<Envelope>& queues : box.from) {
    queues.erase_posted_if([&](Request* r) {
      if (r->fp.seq != seq || !is_collective(r->fp)) return false;
      r->complete(s);
      return true;
    });
  }
}

// Matches a message with a posted receive under the receiver's lock: copies, or ends both with
// mismatch and returns it ("" when none).
std::string deliver(int sender, const Fingerprint& sfp, const void* payload, size_t bytes,
                    Request* send, Request* recv, int receiver) {
  if (!fingerprints_compatible(sfp, recv->fp) || bytes != recv->bytes) {
    std::string body = mismatch_body(sender, sfp, bytes, receiver, recv->fp, recv->bytes);
    if (send != nullptr) send->complete(mismatch_for(sender, body));
    recv->complete(mismatch_for(receiver, body));
    return body;
  }
  if (bytes > 0) std::memcpy(recv->buf, payload, bytes);
  if (send != nullptr) send->complete(Status::success());
  recv->complete(Status::success());
  return "";
}

class LocalTransport final : public Transport {
 public:
  LocalTransport(std::shared_ptr<Fabric> fabric, int rank)
      : fabric_(std::move(fabric)), rank_(rank) {}
  ~LocalTransport() override {
    fail(Status(ErrorCode::aborted, fmt::format("rank {}: transport destroyed", rank_)));
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(fabric_->ranks.size()); }

  void post_send(Request* r) override {
    if (!check_peer(r)) return;
    const uint64_t seq = r->fp.seq;
    const int dst_rank = r->peer;
    std::string mismatch;  // this rank's operation disagrees with the receiver's
    Status stale;          // the receiver has moved past this message's operation
    {
      RankState& dst = at(r->peer);
      Mailbox& box = dst.box;
      MutexLock lock(box.mu);
      // Checked under the receiver's lock: fail() sweeps this mailbox after setting the flag, so
      // a send either sees the flag or is swept.
      if (self().failed.load()) return r->complete(self().first_error());
      if (dst.failed.load()) {
        Status s = lost_or_mismatch(*r, &mismatch);
        if (mismatch.empty()) return r->complete(std::move(s));
        r->complete(std::move(s));
      } else if (box.has_op && is_collective(r->fp) && seq < box.op.seq) {
        // The receiver finished this operation without taking the message.
        stale = Status(ErrorCode::mismatch, stale_text(rank_, r->fp, r->peer, box.op));
        r->complete(Status(ErrorCode::mismatch, fmt::format("rank {}: {}", rank_, stale.message())));
      } else {
        if (box.has_op && is_collective(r->fp) && box.op.seq == seq &&
            !fingerprints_compatible(r->fp, box.op)) {
          mismatch = mismatch_body(rank_, r->fp, r->bytes, r->peer, box.op, r->bytes);
          note_mismatch(box, r->peer, seq, mismatch);
          r->complete(mismatch_for(rank_, mismatch));
        } else {
          mismatch = enqueue_send(box, r);
          if (mismatch.empty()) return;
        }
      }
    }
    if (!stale.ok()) {
      fail_rank(dst_rank, Status(ErrorCode::mismatch,
                                 fmt::format("rank {}: {}", dst_rank, stale.message())));
      return;
    }
    mark_op_mismatch(rank_, seq, mismatch);
  }

  void post_recv(Request* r) override {
    if (!check_peer(r)) return;
    const int sender = r->peer;
    const uint64_t seq = r->fp.seq;
    std::string mismatch;
    {
      Mailbox& box = self().box;
      MutexLock lock(box.mu);
      if (self().failed.load()) return r->complete(self().first_error());
      if (box.has_op && is_collective(r->fp) && box.op.seq == seq && !box.op_mismatch.empty()) {
        return r->complete(mismatch_for(rank_, box.op_mismatch));
      }
      PeerQueues<Envelope>& queues = box.from[static_cast<size_t>(sender)];
      std::optional<Parcel> parcel = queues.take_parked(r->tag);
      if (!parcel) {
        if (!at(sender).failed.load()) {
          queues.add_posted(r);
          return;
        }
        Status s = lost_or_mismatch(*r, &mismatch);
        r->complete(std::move(s));
        if (mismatch.empty()) return;
        note_mismatch(box, rank_, seq, mismatch);
        return;  // the sender is gone; nobody else to tell
      }
      const Envelope& env = parcel->arrival;
      if (env.lost) {
        if (fingerprints_compatible(parcel->fp, r->fp) && parcel->bytes == r->bytes) {
          return r->complete(peer_lost(*r, at(sender).first_error()));
        }
        mismatch = mismatch_body(sender, parcel->fp, parcel->bytes, rank_, r->fp, r->bytes);
        r->complete(mismatch_for(rank_, mismatch));
        note_mismatch(box, rank_, seq, mismatch);
        return;
      }
      mismatch = deliver(sender, parcel->fp, env.payload(), parcel->bytes, env.send, r, rank_);
      if (mismatch.empty()) return;
      note_mismatch(box, rank_, seq, mismatch);
    }
    mark_op_mismatch(sender, seq, mismatch);
  }

  void begin_operation(const Fingerprint& fp) override {
    std::vector<std::pair<int, std::string>> senders;  // to tell once this lock is released
    std::string stale;  // a message of an earlier operation that this rank never received
    {
      Mailbox& box = self().box;
      MutexLock lock(box.mu);
      box.has_op = true;
      box.op = fp;
      box.op_mismatch.clear();
      {
        MutexLock state(self().state_mu);
        self().op = fp;
      }
      if (!is_collective(fp)) return;
      // Messages of this sequence number that arrived early must belong to the same operation.
      for (PeerQueues<Envelope>& queues : box.from) {
        const int sender = queues.peer();
        queues.erase_parked_if([&](Parcel& e) {
          box.mu.assert_held();  // erase_parked_if runs under the caller's lock
          if (is_collective(e.fp) && !e.arrival.lost && e.fp.seq < fp.seq && stale.empty()) {
            stale = stale_text(sender, e.fp, rank_, fp);
          }
          if (!is_collective(e.fp) || e.fp.seq != fp.seq || fingerprints_compatible(e.fp, fp)) {
            return false;
          }
          std::string body = mismatch_body(sender, e.fp, e.bytes, rank_, fp, e.bytes);
          if (e.arrival.send != nullptr) e.arrival.send->complete(mismatch_for(sender, body));
          if (!e.arrival.lost) senders.emplace_back(sender, body);
          if (box.op_mismatch.empty()) box.op_mismatch = std::move(body);
          return true;
        });
      }
    }
    for (const auto& [sender, body] : senders) mark_op_mismatch(sender, fp.seq, body);
    if (!stale.empty()) {
      fail(Status(ErrorCode::mismatch, fmt::format("rank {}: {}", rank_, stale)));
    }
  }

  void fail(const Status& status) override { fail_rank(rank_, status); }

  Status error() const override { return self().first_error(); }

 private:
  RankState& at(int rank) const { return fabric_->ranks[static_cast<size_t>(rank)]; }
  RankState& self() const { return at(rank_); }

  static std::string stale_text(int sender, const Fingerprint& sfp, int receiver,
                                const Fingerprint& now) {
    return fmt::format(
        "rank {} sent a message of {} that rank {} (now in {}) never received: the ranks "
        "called different collectives",
        sender, sfp.describe(), receiver, now.describe());
  }

  // fail() for rank `who`: this one, or a receiver found to have skipped a message.
  void fail_rank(int who, const Status& status) {
    RankState& failing = at(who);
    {
      MutexLock lock(failing.state_mu);
      if (failing.error.ok()) {
        failing.error = status.ok() ? Status(ErrorCode::internal,
                                             fmt::format("rank {}: fail() with ok", who))
                                    : status;
      }
    }
    failing.failed.store(true);
    const Status mine = failing.first_error();
    for (int d = 0; d < size(); ++d) {
      if (d != who) sweep_peer(who, d, mine);
    }
    // This rank's own receives end with its error; peers' rendezvous sends waiting here end as
    // lost (or mismatched) peers; eager copies are dropped.
    std::vector<std::tuple<int, uint64_t, std::string>> senders;  // mismatched, to tell after
    {
      Mailbox& box = failing.box;
      MutexLock lock(box.mu);
      for (PeerQueues<Envelope>& queues : box.from) {
        const int sender = queues.peer();
        auto drained = queues.drain();
        for (Request* r : drained.posted) r->complete(mine);
        for (Parcel& e : drained.parked) {
          Request* send = e.arrival.send;
          if (send == nullptr) continue;
          std::string mismatch;
          const uint64_t seq = send->fp.seq;
          send->complete(lost_or_mismatch(*send, &mismatch, sender));
          if (!mismatch.empty()) senders.emplace_back(sender, seq, std::move(mismatch));
        }
      }
    }
    for (const auto& [sender, seq, body] : senders) mark_op_mismatch(sender, seq, body);
  }

  bool check_peer(Request* r) {
    if (r->peer >= 0 && r->peer < size()) return true;
    if (r->peer == kAnyPeer) {
      r->complete(Status(ErrorCode::invalid_argument,
                         fmt::format("rank {}: the in-process test transport does not receive "
                                     "from any peer", rank_)));
      return false;
    }
    r->complete(Status(ErrorCode::internal,
                       fmt::format("rank {}: {} names rank {} of {}", rank_, r->fp.describe(),
                                   r->peer, size())));
    return false;
  }

  // Under the receiver's lock: hands `r` to a posted receive, or queues it (eager copy or
  // rendezvous). Returns the mismatch when the receive it met disagreed ("" otherwise).
  std::string enqueue_send(Mailbox& box, Request* r) REQUIRES(box.mu) {
    PeerQueues<Envelope>& queues = box.from[static_cast<size_t>(rank_)];
    if (Request* recv = queues.take_posted(r->tag)) {
      std::string body = deliver(rank_, r->fp, r->buf, r->bytes, r, recv, r->peer);
      if (!body.empty()) note_mismatch(box, r->peer, r->fp.seq, body);
      return body;
    }
    const bool eager = r->bytes <= fabric_->options.eager_threshold;
    Parcel parcel{.tag = r->tag, .fp = r->fp, .bytes = r->bytes};
    if (eager) {
      if (r->bytes > 0) {
        parcel.arrival.data = std::unique_ptr<std::byte, PoolDeleter>(
            static_cast<std::byte*>(fabric_->pool.acquire(r->bytes)),
            PoolDeleter{&fabric_->pool, r->bytes});
        std::memcpy(parcel.arrival.data.get(), r->buf, r->bytes);
      }
    } else {
      parcel.arrival.send = r;
    }
    queues.park(std::move(parcel));
    if (eager) r->complete(Status::success());
    return "";
  }

  // Under peer d's lock, when rank `failing` fails: its rendezvous sends queued at d end with its
  // error (leaving a `lost` marker so d still checks their fingerprints), and d's receives from
  // it end as lost peers, or as mismatches when d's call disagreed with the failed rank's.
  void sweep_peer(int failing, int d, const Status& mine) {
    Mailbox& box = at(d).box;
    MutexLock lock(box.mu);
    PeerQueues<Envelope>& queues = box.from[static_cast<size_t>(failing)];
    queues.for_each_parked([&](Parcel& parcel) {
      Envelope& e = parcel.arrival;
      if (e.send == nullptr) return;
      e.send->complete(mine);
      e.send = nullptr;
      e.lost = true;
    });
    // Taken out first: note_mismatch below walks this mailbox's posted receives.
    for (Request* r : queues.take_all_posted()) {
      std::string mismatch;
      const uint64_t seq = r->fp.seq;
      r->complete(lost_or_mismatch(*r, &mismatch, d));
      if (!mismatch.empty()) note_mismatch(box, d, seq, mismatch);
    }
  }

  // The status for request `r` of rank `owner` whose peer has failed: mismatch when the peer's
  // current operation has r's sequence number but disagrees with it, else peer_lost. Sets
  // *mismatch to the mismatch text when there is one.
  Status lost_or_mismatch(const Request& r, std::string* mismatch, int owner = -1) const {
    if (owner < 0) owner = rank_;
    const RankState& peer = at(r.peer);
    const std::optional<Fingerprint> op = peer.current_op();
    if (op && is_collective(r.fp) && op->seq == r.fp.seq && !fingerprints_compatible(r.fp, *op)) {
      std::string body = r.kind == Request::Kind::send
                             ? mismatch_body(owner, r.fp, r.bytes, r.peer, *op, r.bytes)
                             : mismatch_body(r.peer, *op, r.bytes, owner, r.fp, r.bytes);
      Status s = mismatch_for(owner, body);
      if (mismatch != nullptr) *mismatch = std::move(body);
      return s;
    }
    return Status(ErrorCode::peer_lost,
                  fmt::format("rank {}: {} with rank {}: rank {} failed: {}", owner,
                              r.fp.describe(), r.peer, r.peer, peer.first_error().to_string()));
  }

  Status peer_lost(const Request& r, const Status& why) const {
    return Status(ErrorCode::peer_lost,
                  fmt::format("rank {}: {} with rank {}: rank {} failed: {}", rank_,
                              r.fp.describe(), r.peer, r.peer, why.to_string()));
  }

  // Takes `rank`'s mailbox lock: call with no lock held.
  void mark_op_mismatch(int rank, uint64_t seq, const std::string& body) {
    Mailbox& box = at(rank).box;
    MutexLock lock(box.mu);
    note_mismatch(box, rank, seq, body);
  }

  std::shared_ptr<Fabric> fabric_;
  const int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Transport>> make_local_transports(int n,
                                                               LocalTransportOptions options) {
  auto fabric = std::make_shared<Fabric>(n, options);
  std::vector<std::unique_ptr<Transport>> out;
  out.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<LocalTransport>(fabric, r));
  return out;
}

}  // namespace weft
