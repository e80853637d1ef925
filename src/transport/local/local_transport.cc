#include "transport/local/local_transport.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace weft {
namespace {

struct Key {
  int peer;
  uint64_t tag;
  friend bool operator==(const Key&, const Key&) = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<uint64_t>()(k.tag * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(k.peer));
  }
};

// A message that arrived before its receive.
struct Envelope {
  Fingerprint fp;
  size_t bytes = 0;
  std::unique_ptr<std::byte[]> data;  // eager: an owned copy; the send is already complete
  Request* send = nullptr;            // rendezvous: the sender's request, completed on match
  const void* payload() const { return send != nullptr ? send->buf : data.get(); }
};

bool is_collective(const Fingerprint& fp) {
  return fp.kind != OpKind::send && fp.kind != OpKind::recv;
}

// Everything addressed to one rank. Lock order: a Mailbox's mu, then any Rank::error_mu; never
// two mailboxes at once.
struct Mailbox {
  std::mutex mu;
  std::unordered_map<Key, std::deque<Request*>, KeyHash> posted;      // receives not yet matched
  std::unordered_map<Key, std::deque<Envelope>, KeyHash> unexpected;  // sends not yet matched
  // The operation begin_operation announced, and the mismatch found against it (the text after
  // "rank N: "; empty when none).
  bool has_op = false;
  Fingerprint op;
  std::string op_mismatch;
};

struct RankState {
  Mailbox box;
  std::atomic<bool> failed{false};
  mutable std::mutex error_mu;  // leaf lock
  Status error;                 // guarded by error_mu; the first error passed to fail()

  Status first_error() const {
    std::lock_guard<std::mutex> lock(error_mu);
    return error;
  }
};

struct Fabric {
  Fabric(int n, LocalTransportOptions o) : options(o), ranks(static_cast<size_t>(n)) {}
  const LocalTransportOptions options;
  std::deque<RankState> ranks;  // deque: RankState is not movable
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
    if (Status own = own_op_status(r->fp); !own.ok()) return r->complete(std::move(own));
    RankState& dst = fabric_->ranks[static_cast<size_t>(r->peer)];
    Mailbox& box = dst.box;
    std::lock_guard<std::mutex> lock(box.mu);
    // Checked under the receiver's lock: fail() sweeps this mailbox after setting the flag, so a
    // send either sees the flag or is swept.
    if (self().failed.load()) return r->complete(self().first_error());
    if (dst.failed.load()) return r->complete(peer_lost(*r, dst.first_error()));

    if (box.has_op && is_collective(r->fp) && box.op.seq == r->fp.seq) {
      if (box.op_mismatch.empty() && !fingerprints_compatible(r->fp, box.op)) {
        box.op_mismatch = mismatch_body(rank_, r->fp, r->bytes, r->peer, box.op, r->bytes);
        fail_posted_of_op(box, r->peer);
      }
      if (!box.op_mismatch.empty()) return r->complete(mismatch_for(rank_, box.op_mismatch));
    }

    const Key key{rank_, r->tag};
    if (auto it = box.posted.find(key); it != box.posted.end()) {
      Request* recv = it->second.front();
      it->second.pop_front();
      if (it->second.empty()) box.posted.erase(it);
      deliver(rank_, r->fp, r->buf, r->bytes, r, recv, r->peer);
      return;
    }
    Envelope env;
    env.fp = r->fp;
    env.bytes = r->bytes;
    if (r->bytes <= fabric_->options.eager_threshold) {
      if (r->bytes > 0) {
        env.data = std::make_unique_for_overwrite<std::byte[]>(r->bytes);
        std::memcpy(env.data.get(), r->buf, r->bytes);
      }
      box.unexpected[key].push_back(std::move(env));
      r->complete(Status::success());
    } else {
      env.send = r;
      box.unexpected[key].push_back(std::move(env));
    }
  }

  void post_recv(Request* r) override {
    if (!check_peer(r)) return;
    Mailbox& box = self().box;
    std::lock_guard<std::mutex> lock(box.mu);
    if (self().failed.load()) return r->complete(self().first_error());
    if (box.has_op && is_collective(r->fp) && box.op.seq == r->fp.seq &&
        !box.op_mismatch.empty()) {
      return r->complete(mismatch_for(rank_, box.op_mismatch));
    }
    const Key key{r->peer, r->tag};
    if (auto it = box.unexpected.find(key); it != box.unexpected.end()) {
      Envelope env = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) box.unexpected.erase(it);
      deliver(r->peer, env.fp, env.payload(), env.bytes, env.send, r, rank_);
      return;
    }
    RankState& src = fabric_->ranks[static_cast<size_t>(r->peer)];
    if (src.failed.load()) return r->complete(peer_lost(*r, src.first_error()));
    box.posted[key].push_back(r);
  }

  void begin_operation(const Fingerprint& fp) override {
    Mailbox& box = self().box;
    std::lock_guard<std::mutex> lock(box.mu);
    box.has_op = true;
    box.op = fp;
    box.op_mismatch.clear();
    if (!is_collective(fp)) return;
    // Messages of this sequence number that arrived early must belong to the same operation.
    for (auto it = box.unexpected.begin(); it != box.unexpected.end();) {
      auto& queue = it->second;
      for (auto e = queue.begin(); e != queue.end();) {
        if (!is_collective(e->fp) || e->fp.seq != fp.seq || fingerprints_compatible(e->fp, fp)) {
          ++e;
          continue;
        }
        const int sender = it->first.peer;
        std::string body = mismatch_body(sender, e->fp, e->bytes, rank_, fp, e->bytes);
        if (e->send != nullptr) e->send->complete(mismatch_for(sender, body));
        if (box.op_mismatch.empty()) box.op_mismatch = std::move(body);
        e = queue.erase(e);
      }
      it = queue.empty() ? box.unexpected.erase(it) : std::next(it);
    }
  }

  void fail(const Status& status) override {
    {
      std::lock_guard<std::mutex> lock(self().error_mu);
      if (self().error.ok()) {
        self().error = status.ok() ? Status(ErrorCode::internal,
                                            fmt::format("rank {}: fail() with ok", rank_))
                                   : status;
      }
    }
    self().failed.store(true);
    const Status mine = self().first_error();
    for (int d = 0; d < size(); ++d) {
      if (d == rank_) continue;
      Mailbox& box = fabric_->ranks[static_cast<size_t>(d)].box;
      std::lock_guard<std::mutex> lock(box.mu);
      // This rank's rendezvous sends waiting at the peer end with this rank's error; the peer's
      // receives from this rank end as peer_lost. Eager copies stay receivable.
      for (auto it = box.unexpected.begin(); it != box.unexpected.end();) {
        auto& queue = it->second;
        if (it->first.peer == rank_) {
          for (auto e = queue.begin(); e != queue.end();) {
            if (e->send == nullptr) {
              ++e;
              continue;
            }
            e->send->complete(mine);
            e = queue.erase(e);
          }
        }
        it = queue.empty() ? box.unexpected.erase(it) : std::next(it);
      }
      for (auto it = box.posted.begin(); it != box.posted.end();) {
        if (it->first.peer != rank_) {
          ++it;
          continue;
        }
        for (Request* r : it->second) r->complete(peer_lost(*r, mine));
        it = box.posted.erase(it);
      }
    }
    Mailbox& box = self().box;
    std::lock_guard<std::mutex> lock(box.mu);
    for (auto& [key, queue] : box.posted) {
      for (Request* r : queue) r->complete(mine);
    }
    box.posted.clear();
    for (auto& [key, queue] : box.unexpected) {
      for (Envelope& e : queue) {
        if (e.send != nullptr) e.send->complete(lost_to_failed(key.peer, e.fp, rank_, mine));
      }
    }
    box.unexpected.clear();
  }

  Status error() const override { return self().first_error(); }

 private:
  RankState& self() const { return fabric_->ranks[static_cast<size_t>(rank_)]; }

  bool check_peer(Request* r) {
    if (r->peer >= 0 && r->peer < size()) return true;
    r->complete(Status(ErrorCode::internal,
                       fmt::format("rank {}: {} names rank {} of {}", rank_, r->fp.describe(),
                                   r->peer, size())));
    return false;
  }

  // The error of this rank's own operation (a mismatch found against it), or ok.
  Status own_op_status(const Fingerprint& fp) {
    Mailbox& box = self().box;
    std::lock_guard<std::mutex> lock(box.mu);
    if (box.has_op && is_collective(fp) && box.op.seq == fp.seq && !box.op_mismatch.empty()) {
      return mismatch_for(rank_, box.op_mismatch);
    }
    return Status::success();
  }

  // Ends the receives posted at `box` (owned by rank `owner`) for the current operation.
  void fail_posted_of_op(Mailbox& box, int owner) {
    const Status s = mismatch_for(owner, box.op_mismatch);
    for (auto it = box.posted.begin(); it != box.posted.end();) {
      auto& queue = it->second;
      for (auto q = queue.begin(); q != queue.end();) {
        if ((*q)->fp.seq == box.op.seq && is_collective((*q)->fp)) {
          (*q)->complete(s);
          q = queue.erase(q);
        } else {
          ++q;
        }
      }
      it = queue.empty() ? box.posted.erase(it) : std::next(it);
    }
  }

  // Matches a message with a posted receive: copies, or ends both with mismatch.
  static void deliver(int sender, const Fingerprint& sfp, const void* payload, size_t bytes,
                      Request* send, Request* recv, int receiver) {
    if (!fingerprints_compatible(sfp, recv->fp) || bytes != recv->bytes) {
      const std::string body = mismatch_body(sender, sfp, bytes, receiver, recv->fp, recv->bytes);
      if (send != nullptr) send->complete(mismatch_for(sender, body));
      recv->complete(mismatch_for(receiver, body));
      return;
    }
    if (bytes > 0) std::memcpy(recv->buf, payload, bytes);
    if (send != nullptr) send->complete(Status::success());
    recv->complete(Status::success());
  }

  Status peer_lost(const Request& r, const Status& why) const {
    return Status(ErrorCode::peer_lost,
                  fmt::format("rank {}: {} with rank {}: rank {} failed: {}", rank_,
                              r.fp.describe(), r.peer, r.peer, why.to_string()));
  }
  static Status lost_to_failed(int sender, const Fingerprint& fp, int receiver,
                               const Status& why) {
    return Status(ErrorCode::peer_lost,
                  fmt::format("rank {}: {} with rank {}: rank {} failed: {}", sender,
                              fp.describe(), receiver, receiver, why.to_string()));
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
