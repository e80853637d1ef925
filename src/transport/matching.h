// Tag matching, one engine for every transport: receives posted before their message, messages
// that arrived before their receive ("parked"), receives from any peer, the check of parked
// collective messages against the operation that starts, and the bytes parked messages hold.
//
// What it is: two class templates over the transport's parked-arrival record `Arrival` (TCP: an
// Unexpected* whose payload may still be arriving; shm: a record by value with the sender's
// address offer; local: an envelope with an owned copy or the sender's request). The engine never
// looks inside an Arrival and never completes a Request: it only decides who matches whom, and
// the transport moves the bytes and completes requests (with its own lock held, as before).
//  - PeerQueues<Arrival>: one per peer, the receives posted for that peer (in posting order) and
//    the arrivals parked from it (in arrival order). Guarded by the transport's lock for that
//    peer: every member function requires the caller to hold it ("the peer lock"). Several
//    PeerQueues may share one lock (the local transport guards a rank's whole mailbox with one).
//  - Matcher<Arrival>: one per transport, shared by its PeerQueues: the receives from any peer
//    (kAnyPeer, point-to-point only) under its own mutex, the counter that orders posts and
//    arrivals, and counters over all peers (parked collective messages, staged bytes), which are
//    atomics readable from any thread.
// Ownership: the engine stores Request pointers (owned by their posters, as transport.h says)
// and Arrival values (moved in by park(), moved out by whatever takes them). What comes out of
// the engine (a matched receive, a matched arrival, everything drained on failure) is the
// caller's to complete or free; the engine forgets it.
//
// Matching rules (transport.h): a receive for (peer, tag) takes the oldest parked arrival from
// that peer with that tag; an arrival takes the oldest receive posted for it, where "posted for
// it" means posted for (its peer, its tag) or posted for (kAnyPeer, its tag), and "oldest" is by
// posting order across both kinds (as MPI: a receive from any peer posted before a receive from
// this peer takes the message first). A receive from any peer, when posted, takes the parked
// arrival with its tag that arrived first over all peers (so no peer is starved by one that
// always has a message waiting). Collective tags (no kP2pTagBit) never meet any-source receives:
// their path takes no lock but the peer lock and no atomic besides the parked-collective count.
//
// The any-source protocol (no arrival and any-source post miss each other):
//  - post_any(r) takes every registered peer lock (in registration order), then the matcher's
//    mutex. With every peer held no arrival is in progress, so the search of all parked arrivals
//    and the parking of r in the any-source list are one step: either some parked arrival is
//    taken, or r is listed before any later arrival looks.
//  - An arrival (take_posted/arrive, under its peer lock) looks at the any-source list (under
//    the matcher's mutex) only for a point-to-point tag and only while the list is not empty; the
//    list only grows under every peer lock, so a look under one peer lock sees every receive
//    listed before it. Whoever removes a receive from the list owns its match.
//  - Invariant, under the locks: no parked arrival with tag T coexists with a receive that could
//    take it (posted for its peer and T, or for kAnyPeer and T).
// Lock order: peer locks (several only in registration order, as post_any takes them), then the
// matcher's mutex, a leaf the engine takes only for a moment. A thread that holds a peer lock must
// not call post_any. fail(): the transport drains each PeerQueues under its peer lock and calls
// close_any(), which returns the any-source receives and makes later post_any calls answer
// AnyPost::closed (the transport then completes the receive with its failure).
//
// Hot path: no allocation once the vectors have grown to the number of outstanding messages
// (erasing keeps capacity), linear scans of short vectors (a handful of outstanding messages per
// peer), no virtual calls (templates), no lock besides the peer lock for collective tags (a
// point-to-point post or arrival adds one relaxed fetch_add, its place in the order).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "transport/transport.h"

namespace weft {

// Point-to-point tags (p2p_tag) may meet receives from any peer; collective tags never do.
inline constexpr bool is_p2p_tag(uint64_t tag) { return (tag & kP2pTagBit) != 0; }

template <typename Arrival>
class Matcher;

// A message that arrived before its receive. The transport fills every field but `order`.
template <typename Arrival>
struct Parked {
  uint64_t tag = 0;
  Fingerprint fp;       // the sender's, checked against the receive and the current operation
  uint64_t bytes = 0;   // the message's size
  uint64_t staged = 0;  // bytes it holds in staging memory, counted by staged_bytes() (credits)
  uint64_t order = 0;   // set by park(): arrival order over all peers (point-to-point tags)
  Arrival arrival{};    // the transport's record
};

// The posted receives and parked arrivals of one peer. Every member requires the peer lock.
// Not to be moved once registered with Matcher::add_peer (the matcher keeps its address).
template <typename Arrival>
class PeerQueues {
 public:
  // `peer`: the rank stored in Request::peer of an any-source receive this peer's message takes.
  PeerQueues(Matcher<Arrival>& matcher, int peer) : matcher_(&matcher), peer_(peer) {}
  PeerQueues(PeerQueues&&) noexcept = default;
  PeerQueues& operator=(PeerQueues&&) noexcept = default;
  PeerQueues(const PeerQueues&) = delete;
  PeerQueues& operator=(const PeerQueues&) = delete;

  int peer() const { return peer_; }

  // ---- receives posted for this peer ----
  // Posts receive `r` (r->peer is this peer): returns the oldest parked arrival with r->tag
  // (removed), else records r as posted and returns nothing.
  std::optional<Parked<Arrival>> post(Request* r) {
    std::optional<Parked<Arrival>> a = take_parked(r->tag);
    if (!a) add_posted(r);
    return a;
  }
  // The two halves of post(), for a transport that decides something between them (the local
  // transport fails a receive from a peer that is gone instead of posting it). Call both under
  // one hold of the peer lock, or an arrival may be parked in between and never meet `r`.
  std::optional<Parked<Arrival>> take_parked(uint64_t tag) {
    const size_t i = find_parked(tag);
    if (i == parked_.size()) return std::nullopt;
    std::optional<Parked<Arrival>> a(std::move(parked_[i]));
    parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
    unpark(*a);
    return a;
  }
  void add_posted(Request* r) {
    // Only point-to-point receives can be compared with an any-source receive: collectives skip
    // the shared counter.
    posted_.push_back({r, is_p2p_tag(r->tag) ? matcher_->next_order() : 0});
  }

  // An arrival taken by take_parked() (or handed to post_any's on_match) that the receive refused
  // (the TCP transport keeps a message whose size or operation disagrees with the receive, so a
  // corrected receive may still take it): parked again as the oldest of its tag, with its place
  // in the arrival order (`order`) and its counters as before it was taken.
  void put_back(Parked<Arrival> a) {
    if (!is_p2p_tag(a.tag)) matcher_->parked_collectives_.fetch_add(1, std::memory_order_acq_rel);
    if (a.staged != 0) {
      staged_ += a.staged;
      matcher_->add_staged(a.staged);
    }
    parked_.insert(parked_.begin(), std::move(a));
  }

  // ---- messages arriving from this peer ----
  // The receive an arrival with `tag` takes (removed; an any-source one gets r->peer set), or
  // nullptr. Before park(), under the same hold of the peer lock (see post()).
  Request* take_posted(uint64_t tag) {
    size_t i = 0;
    while (i < posted_.size() && posted_[i].r->tag != tag) ++i;
    if (is_p2p_tag(tag) && matcher_->any_count_.load(std::memory_order_relaxed) != 0) {
      const uint64_t mine =
          i < posted_.size() ? posted_[i].order : std::numeric_limits<uint64_t>::max();
      if (Request* any = matcher_->claim_any(tag, mine, peer_)) return any;
    }
    if (i == posted_.size()) return nullptr;
    Request* r = posted_[i].r;
    posted_.erase(posted_.begin() + static_cast<std::ptrdiff_t>(i));
    return r;
  }
  // Parks an arrival nobody waits for (after take_posted returned nullptr).
  void park(Parked<Arrival> a) {
    a.order = is_p2p_tag(a.tag) ? matcher_->next_order() : 0;
    if (!is_p2p_tag(a.tag)) matcher_->parked_collectives_.fetch_add(1, std::memory_order_acq_rel);
    if (a.staged != 0) {
      staged_ += a.staged;
      matcher_->add_staged(a.staged);
    }
    parked_.push_back(std::move(a));
  }
  // take_posted, else park(make()) (`make` runs only then). Returns the receive, or nullptr.
  template <typename Make>
  Request* arrive(uint64_t tag, Make&& make) {
    if (Request* r = take_posted(tag)) return r;
    park(make());
    return nullptr;
  }

  // ---- the operation that starts ----
  // The first parked collective message that disagrees with `current` (collective_mismatch:
  // same sequence number but another call, or an earlier sequence number that `rank` left
  // without receiving it); ok when none.
  Status check_parked(int rank, const Fingerprint& current) const {
    for (const Parked<Arrival>& a : parked_) {
      if (is_p2p_tag(a.tag)) continue;
      Status st = collective_mismatch(rank, current, peer_, a.fp);
      if (!st.ok()) return st;
    }
    return Status();
  }
  // Visits the parked arrivals in arrival order; `f(Parked&)` may change `arrival` only.
  template <typename F>
  void for_each_parked(F&& f) {
    for (Parked<Arrival>& a : parked_) f(a);
  }
  // Visits the posted receives in posting order (`f(const Request&)`).
  template <typename F>
  void for_each_posted(F&& f) const {
    for (const Posted& p : posted_) f(static_cast<const Request&>(*p.r));
  }
  // Removes the parked arrivals for which `pred(Parked&)` is true (called once for each, in
  // arrival order; it may act on the arrival before it goes, e.g. complete the sender's request).
  template <typename Pred>
  size_t erase_parked_if(Pred&& pred) {
    size_t kept = 0;
    const size_t n = parked_.size();
    for (size_t i = 0; i < n; ++i) {
      if (pred(parked_[i])) {
        unpark(parked_[i]);
        continue;
      }
      if (kept != i) parked_[kept] = std::move(parked_[i]);
      ++kept;
    }
    parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(kept), parked_.end());
    return n - kept;
  }
  // Removes the posted receives for which `pred(Request*)` is true (called once for each, in
  // posting order; it may complete the request, which the engine does not touch afterwards).
  template <typename Pred>
  size_t erase_posted_if(Pred&& pred) {
    size_t kept = 0;
    const size_t n = posted_.size();
    for (size_t i = 0; i < n; ++i) {
      if (pred(posted_[i].r)) continue;
      posted_[kept++] = posted_[i];
    }
    posted_.erase(posted_.begin() + static_cast<std::ptrdiff_t>(kept), posted_.end());
    return n - kept;
  }

  // ---- failure ----
  // Everything this peer holds, taken out: the posted receives in posting order and the parked
  // arrivals in arrival order, each exactly once. The caller completes or frees them.
  struct Drained {
    std::vector<Request*> posted;
    std::vector<Parked<Arrival>> parked;
  };
  Drained drain() {
    Drained d;
    d.posted = take_all_posted();
    for (Parked<Arrival>& a : parked_) unpark(a);
    d.parked = std::move(parked_);
    parked_.clear();
    return d;
  }
  // The posted receives only (the parked arrivals stay).
  std::vector<Request*> take_all_posted() {
    std::vector<Request*> out;
    out.reserve(posted_.size());
    for (const Posted& p : posted_) out.push_back(p.r);
    posted_.clear();
    return out;
  }

  // ---- counters (peer lock) ----
  size_t posted_count() const { return posted_.size(); }
  size_t parked_count() const { return parked_.size(); }
  // Bytes the parked arrivals hold in staging memory (Parked::staged), plus those held with
  // hold_staged(): TCP bounds this by the eager credit it granted the peer.
  uint64_t staged_bytes() const { return staged_; }
  // For an arrival matched while its payload still lands in staging memory (TCP's eager payload
  // in flight): keeps `bytes` counted after take_parked() uncounted them, until release_staged().
  void hold_staged(uint64_t bytes) {
    staged_ += bytes;
    matcher_->add_staged(bytes);
  }
  void release_staged(uint64_t bytes) {
    staged_ -= bytes;
    matcher_->sub_staged(bytes);
  }

 private:
  struct Posted {
    Request* r;
    uint64_t order;  // posting order (point-to-point tags; 0 for collectives)
  };

  size_t find_parked(uint64_t tag) const {
    size_t i = 0;
    while (i < parked_.size() && parked_[i].tag != tag) ++i;
    return i;
  }
  // Counters for an arrival that leaves the parked list.
  void unpark(const Parked<Arrival>& a) {
    if (!is_p2p_tag(a.tag)) matcher_->parked_collectives_.fetch_sub(1, std::memory_order_acq_rel);
    if (a.staged != 0) {
      staged_ -= a.staged;
      matcher_->sub_staged(a.staged);
    }
  }

  friend class Matcher<Arrival>;

  Matcher<Arrival>* matcher_;
  int peer_;
  std::vector<Posted> posted_;           // in posting order
  std::vector<Parked<Arrival>> parked_;  // in arrival order
  uint64_t staged_ = 0;
};

// What a transport shares between its peers: receives from any peer and counters over all peers.
template <typename Arrival>
class Matcher {
 public:
  Matcher() = default;
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // Set-up, before any other call: `q` (guarded by `mu`) is searched by post_any. Peers that
  // share a lock must be added one after the other (the lock is then taken once).
  void add_peer(Mutex& mu, PeerQueues<Arrival>& q) { peers_.push_back({&mu, &q}); }

  enum class AnyPost {
    matched,  // a parked arrival was taken: on_match ran
    posted,   // listed: the first arrival with its tag takes it
    closed,   // after close_any(): the caller completes it with its failure
  };
  // Posts a receive from any peer (r->peer == kAnyPeer, a point-to-point tag). Call with no peer
  // lock held: takes them all (see the protocol above). When a parked arrival matches,
  // r->peer becomes its peer and `on_match(PeerQueues&, Parked&&)` runs with every peer lock still
  // held (it may use that peer's state, as take_parked's caller would, and put_back() an arrival
  // the receive refuses, but takes no peer lock; it tells the thread-safety analysis which lock
  // it relies on with Mutex::assert_held()).
  template <typename OnMatch>
  AnyPost post_any(Request* r, OnMatch&& on_match) {
    if (closed()) return AnyPost::closed;
    LockAll locks(peers_);
    PeerQueues<Arrival>* best = nullptr;
    size_t best_index = 0;
    for (const PeerRef& ref : peers_) {
      PeerQueues<Arrival>& q = *ref.queues;
      const size_t i = q.find_parked(r->tag);
      if (i == q.parked_.size()) continue;
      if (best == nullptr || q.parked_[i].order < best->parked_[best_index].order) {
        best = &q;
        best_index = i;
      }
    }
    if (best != nullptr) {
      Parked<Arrival> a(std::move(best->parked_[best_index]));
      best->parked_.erase(best->parked_.begin() + static_cast<std::ptrdiff_t>(best_index));
      best->unpark(a);
      r->peer = best->peer_;
      on_match(*best, std::move(a));
      return AnyPost::matched;
    }
    MutexLock lock(any_mu_);
    if (closed_) return AnyPost::closed;
    any_.push_back({r, next_order()});
    any_count_.store(any_.size(), std::memory_order_relaxed);
    return AnyPost::posted;
  }
  // fail(): takes the listed any-source receives (in posting order) and answers AnyPost::closed
  // to every later post_any.
  std::vector<Request*> close_any() {
    std::vector<Request*> out;
    MutexLock lock(any_mu_);
    closed_ = true;
    out.reserve(any_.size());
    for (const AnyEntry& e : any_) out.push_back(e.r);
    any_.clear();
    any_count_.store(0, std::memory_order_relaxed);
    return out;
  }
  bool closed() const {
    MutexLock lock(any_mu_);
    return closed_;
  }

  // ---- counters over all peers (any thread) ----
  // Receives from any peer waiting for their message.
  size_t any_posted() const { return any_count_.load(std::memory_order_relaxed); }
  // Parked messages of collectives: begin_operation need not look at any peer while it is 0.
  // A hint, like a scan under the peer locks: a message parked while begin_operation runs is
  // checked by its arrival path against whichever operation that path read (see the end of this
  // file for how each transport closes that window).
  int64_t parked_collectives() const { return parked_collectives_.load(std::memory_order_acquire); }
  // Bytes in staging memory now (PeerQueues::staged_bytes summed), and the most at once.
  uint64_t staged_bytes() const { return staged_now_.load(std::memory_order_relaxed); }
  uint64_t staged_peak() const { return staged_peak_.load(std::memory_order_relaxed); }

 private:
  friend class PeerQueues<Arrival>;

  struct PeerRef {
    Mutex* mu;
    PeerQueues<Arrival>* queues;
  };
  struct AnyEntry {
    Request* r;
    uint64_t order;
  };
  // Every registered peer lock, in registration order (a lock shared by neighbours once). Not
  // analysed: locks taken in a loop are beyond clang's thread-safety analysis; on_match callers
  // tell it what they hold with Mutex::assert_held().
  class LockAll {
   public:
    explicit LockAll(const std::vector<PeerRef>& peers) NO_THREAD_SAFETY_ANALYSIS : peers_(peers) {
      const Mutex* last = nullptr;
      for (const PeerRef& p : peers_) {
        if (p.mu != last) p.mu->lock();
        last = p.mu;
      }
    }
    ~LockAll() NO_THREAD_SAFETY_ANALYSIS {
      const Mutex* last = nullptr;
      for (auto it = peers_.rbegin(); it != peers_.rend(); ++it) {
        if (it->mu != last) it->mu->unlock();
        last = it->mu;
      }
    }
    LockAll(const LockAll&) = delete;
    LockAll& operator=(const LockAll&) = delete;

   private:
    const std::vector<PeerRef>& peers_;
  };

  uint64_t next_order() { return order_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // A peer lock held: the oldest listed any-source receive for `tag` if it was posted before
  // `older_than` (the order of the peer's own candidate), removed, with r->peer = `peer`.
  Request* claim_any(uint64_t tag, uint64_t older_than, int peer) {
    MutexLock lock(any_mu_);
    for (size_t i = 0; i < any_.size(); ++i) {
      if (any_[i].r->tag != tag) continue;
      if (any_[i].order > older_than) return nullptr;
      Request* r = any_[i].r;
      any_.erase(any_.begin() + static_cast<std::ptrdiff_t>(i));
      any_count_.store(any_.size(), std::memory_order_relaxed);
      r->peer = peer;
      return r;
    }
    return nullptr;
  }
  void add_staged(uint64_t bytes) {
    const uint64_t now = staged_now_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    uint64_t peak = staged_peak_.load(std::memory_order_relaxed);
    while (now > peak &&
           !staged_peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void sub_staged(uint64_t bytes) { staged_now_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::vector<PeerRef> peers_;  // fixed after set-up
  std::atomic<uint64_t> order_{0};
  mutable Mutex any_mu_;  // leaf
  std::vector<AnyEntry> any_ GUARDED_BY(any_mu_);  // receives from any peer, in posting order
  bool closed_ GUARDED_BY(any_mu_) = false;
  // any_.size(), written under any_mu_; read under a peer lock (it only grows under all of them).
  std::atomic<size_t> any_count_{0};
  std::atomic<int64_t> parked_collectives_{0};
  std::atomic<uint64_t> staged_now_{0};
  std::atomic<uint64_t> staged_peak_{0};
};

// Who uses it, and for what (each transport's own record, locks and byte moves stay its own):
//  - TCP (tcp/), Arrival = Unexpected*: PeerQueues in each Peer (GUARDED_BY Peer::mu), the
//    Matcher in TcpTransport. An eager message parks when its header arrives, with
//    staged = its size (the credit check reads staged_bytes()); matched while its payload still
//    arrives, it leaves the parked list and stays counted (hold_staged) until the payload is in
//    (release_staged). A receive whose size or operation disagrees with the message it took ends
//    with the mismatch and put_back() parks the message again.
//  - Shared memory (shm/), Arrival = Unexpected by value (payload copy or the sender's address
//    offer): PeerQueues in each Peer, named by the rank messages call it (Request::peer).
//  - Local (local/), Arrival = Envelope: one mailbox lock guards a rank's PeerQueues of every
//    sender; no receives from any peer.
// All three check parked collective messages in begin_operation (TCP and shm only while
// parked_collectives() is not 0), and on failure drain() every peer and close_any(). A message checked on arrival
// against the operation before and parked just after begin_operation read that count would be
// seen by neither check: TCP holds fp_mu_ from the arrival check until the message is parked
// (begin_operation stores the new operation under it); shm keeps begin_operation lock-free and
// checks parked messages again when a waiter goes to sleep (ShmTransport::parked_mismatch);
// local checks, parks and begins operations under the mailbox lock.
//
// Adopting the engine changed two ambiguous-order cases of TCP and shm toward the rules above
// (and MPI): a receive from any peer posted before a receive for one peer now takes that peer's
// message first (both preferred the receive that names the peer), and a receive from any peer
// takes the waiting message that arrived first over all peers (both took the lowest-ranked
// peer's). CommunicatorTest.AnySource* checks both on TCP and shm.

}  // namespace weft
