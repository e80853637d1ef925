// The tag-matching engine (transport/matching.h) alone, without a transport: order per
// (peer, tag), receives from any peer (posting order against receives for one peer, arrival order
// over the peers, no starved peer), parked collective messages against the operation that
// starts, draining on failure, staged-bytes counters, and a multithreaded stress run of posts
// and arrivals under per-peer locks.
#include "transport/matching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace weft {
namespace {

// What the tests park: which peer sent it and its number among that peer's messages.
struct Msg {
  int peer = -1;
  int seq = -1;
};

using Queues = PeerQueues<Msg>;
using AnyPost = Matcher<Msg>::AnyPost;
using PeerSeq = std::pair<int, int>;  // (peer, seq)

Fingerprint collective_fp(OpKind kind, uint64_t seq) {
  Fingerprint fp;
  fp.kind = kind;
  fp.dtype = DataType::fp32;
  fp.count = 4;
  fp.seq = seq;
  return fp;
}

Fingerprint p2p_fp() {
  Fingerprint fp;
  fp.kind = OpKind::send;
  fp.count = 4;
  return fp;
}

// A matcher over `n` peers, each with its own lock (as TCP and shm have).
class Engine {
 public:
  explicit Engine(int n) : mu_(static_cast<size_t>(n)) {
    for (int p = 0; p < n; ++p) queues_.emplace_back(matcher_, p);
    for (int p = 0; p < n; ++p) matcher_.add_peer(mu_[static_cast<size_t>(p)], queues_[p]);
  }
  Matcher<Msg>& matcher() { return matcher_; }
  Queues& q(int p) { return queues_[static_cast<size_t>(p)]; }
  Mutex& mu(int p) { return mu_[static_cast<size_t>(p)]; }
  int size() const { return static_cast<int>(queues_.size()); }

  // An arrival from `peer`: the receive it took, or nullptr when parked.
  Request* arrive(int peer, uint64_t tag, int seq, uint64_t staged = 0, Fingerprint fp = p2p_fp()) {
    MutexLock lock(mu(peer));
    return q(peer).arrive(tag, [&] {
      return Parked<Msg>{
          .tag = tag, .fp = fp, .bytes = 4, .staged = staged, .arrival = Msg{peer, seq}};
    });
  }
  // A receive for one peer: the parked message it took, if any.
  std::optional<Msg> post(Request* r) {
    MutexLock lock(mu(r->peer));
    std::optional<Parked<Msg>> a = q(r->peer).post(r);
    if (!a) return std::nullopt;
    return a->arrival;
  }
  // A receive from any peer: the parked message it took, if any.
  std::optional<Msg> post_any(Request* r, AnyPost* result = nullptr) {
    std::optional<Msg> got;
    const AnyPost res = matcher_.post_any(r, [&](Queues& from, Parked<Msg>&& a) {
      EXPECT_EQ(from.peer(), a.arrival.peer);
      got = a.arrival;
    });
    if (result != nullptr) *result = res;
    return got;
  }

 private:
  Matcher<Msg> matcher_;
  std::deque<Mutex> mu_;
  std::deque<Queues> queues_;
};

// Requests live in a deque (they hold an atomic: not movable).
struct Requests {
  std::deque<Request> all;
  Request* make(int peer, uint64_t tag) {
    Request& r = all.emplace_back();
    r.kind = Request::Kind::recv;
    r.peer = peer;
    r.tag = tag;
    r.bytes = 4;
    r.fp.kind = OpKind::recv;
    r.fp.count = 4;
    return &r;
  }
};

constexpr uint64_t kTag = p2p_tag(5);
constexpr uint64_t kOtherTag = p2p_tag(6);

TEST(Matching, SamePeerAndTagMatchInOrder) {
  Engine e(3);
  Requests rs;
  ASSERT_EQ(e.arrive(1, kTag, 0), nullptr);
  ASSERT_EQ(e.arrive(1, kTag, 1), nullptr);
  ASSERT_EQ(e.arrive(1, kOtherTag, 0), nullptr);  // another tag: not for these receives
  ASSERT_EQ(e.arrive(2, kTag, 0), nullptr);       // another peer: not for these receives
  EXPECT_EQ(e.q(1).parked_count(), 3u);

  std::optional<Msg> m = e.post(rs.make(1, kTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 0);
  m = e.post(rs.make(1, kTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 1);
  // Nothing more from peer 1 with kTag: these two wait, and take the next arrivals in order.
  Request* r2 = rs.make(1, kTag);
  Request* r3 = rs.make(1, kTag);
  EXPECT_FALSE(e.post(r2));
  EXPECT_FALSE(e.post(r3));
  EXPECT_EQ(e.q(1).posted_count(), 2u);
  EXPECT_EQ(e.arrive(1, kOtherTag, 1), nullptr);  // parked behind the first kOtherTag one
  EXPECT_EQ(e.arrive(1, kTag, 2), r2);
  EXPECT_EQ(e.arrive(1, kTag, 3), r3);
  EXPECT_EQ(e.q(1).posted_count(), 0u);
  // The other tag's messages are still there, in arrival order.
  m = e.post(rs.make(1, kOtherTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 0);
  m = e.post(rs.make(1, kOtherTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 1);
  m = e.post(rs.make(2, kTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->peer, 2);
}

TEST(Matching, CollectiveTagsMatchInOrderToo) {
  Engine e(2);
  Requests rs;
  const uint64_t tag = collective_tag(7, 3);
  const Fingerprint fp = collective_fp(OpKind::allreduce, 7);
  Request* a = rs.make(0, tag);
  Request* b = rs.make(0, tag);
  EXPECT_FALSE(e.post(a));
  EXPECT_FALSE(e.post(b));
  EXPECT_EQ(e.arrive(0, tag, 0, 0, fp), a);
  EXPECT_EQ(e.arrive(0, tag, 1, 0, fp), b);
  EXPECT_EQ(e.arrive(0, tag, 2, 0, fp), nullptr);
  EXPECT_EQ(e.matcher().parked_collectives(), 1);
  std::optional<Msg> m = e.post(rs.make(0, tag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 2);
  EXPECT_EQ(e.matcher().parked_collectives(), 0);
}

TEST(Matching, AnySourcePostedFirstTakesTheFirstArrival) {
  Engine e(3);
  Requests rs;
  Request* any = rs.make(kAnyPeer, kTag);
  Request* mine = rs.make(1, kTag);
  AnyPost res{};
  EXPECT_FALSE(e.post_any(any, &res));
  EXPECT_EQ(res, AnyPost::posted);
  EXPECT_EQ(e.matcher().any_posted(), 1u);
  EXPECT_FALSE(e.post(mine));
  // Both could take peer 1's message; the one posted first does, and learns its sender.
  EXPECT_EQ(e.arrive(1, kTag, 0), any);
  EXPECT_EQ(any->peer, 1);
  EXPECT_EQ(e.arrive(1, kTag, 1), mine);
  EXPECT_EQ(e.matcher().any_posted(), 0u);
}

TEST(Matching, SpecificReceivePostedFirstTakesTheFirstArrival) {
  Engine e(3);
  Requests rs;
  Request* mine = rs.make(1, kTag);
  Request* any = rs.make(kAnyPeer, kTag);
  EXPECT_FALSE(e.post(mine));
  EXPECT_FALSE(e.post_any(any));
  EXPECT_EQ(e.arrive(1, kTag, 0), mine);
  EXPECT_EQ(e.arrive(1, kTag, 1), any);
  EXPECT_EQ(any->peer, 1);
}

TEST(Matching, AnySourceOnlyMeetsItsTag) {
  Engine e(2);
  Requests rs;
  Request* any = rs.make(kAnyPeer, kTag);
  EXPECT_FALSE(e.post_any(any));
  EXPECT_EQ(e.arrive(0, kOtherTag, 0), nullptr);
  EXPECT_EQ(e.arrive(0, collective_tag(1, 0), 0, 0, collective_fp(OpKind::allreduce, 1)), nullptr);
  EXPECT_EQ(e.arrive(1, kTag, 0), any);
  EXPECT_EQ(any->peer, 1);
}

TEST(Matching, AnySourceTakesParkedArrivalsInArrivalOrder) {
  Engine e(3);
  Requests rs;
  ASSERT_EQ(e.arrive(2, kTag, 0), nullptr);
  ASSERT_EQ(e.arrive(0, kTag, 0), nullptr);
  ASSERT_EQ(e.arrive(1, kTag, 0), nullptr);
  ASSERT_EQ(e.arrive(0, kTag, 1), nullptr);
  const std::vector<std::pair<int, int>> want = {{2, 0}, {0, 0}, {1, 0}, {0, 1}};
  for (const auto& [peer, seq] : want) {
    Request* r = rs.make(kAnyPeer, kTag);
    AnyPost res{};
    std::optional<Msg> m = e.post_any(r, &res);
    EXPECT_EQ(res, AnyPost::matched);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->peer, peer);
    EXPECT_EQ(m->seq, seq);
    EXPECT_EQ(r->peer, peer);
  }
  EXPECT_EQ(e.q(0).parked_count() + e.q(1).parked_count() + e.q(2).parked_count(), 0u);
}

TEST(Matching, ListedAnySourceReceivesTakeArrivalsInPostingOrder) {
  Engine e(3);
  Requests rs;
  std::vector<Request*> any;
  for (int i = 0; i < 3; ++i) {
    any.push_back(rs.make(kAnyPeer, kTag));
    EXPECT_FALSE(e.post_any(any.back()));
  }
  EXPECT_EQ(e.arrive(2, kTag, 0), any[0]);
  EXPECT_EQ(e.arrive(0, kTag, 0), any[1]);
  EXPECT_EQ(e.arrive(1, kTag, 0), any[2]);
  EXPECT_EQ(any[0]->peer, 2);
  EXPECT_EQ(any[1]->peer, 0);
  EXPECT_EQ(any[2]->peer, 1);
}

TEST(Matching, APeerThatAlwaysHasAMessageWaitingStarvesNoOther) {
  // Peer 0 keeps a message parked at all times; peer 1's message, parked after peer 0's first,
  // is taken second (a scan in rank order would take peer 0's forever).
  Engine e(2);
  Requests rs;
  int next0 = 0;
  ASSERT_EQ(e.arrive(0, kTag, next0++), nullptr);
  ASSERT_EQ(e.arrive(1, kTag, 0), nullptr);
  ASSERT_EQ(e.arrive(0, kTag, next0++), nullptr);
  std::vector<int> peers;
  for (int i = 0; i < 4; ++i) {
    std::optional<Msg> m = e.post_any(rs.make(kAnyPeer, kTag));
    ASSERT_TRUE(m);
    peers.push_back(m->peer);
    ASSERT_EQ(e.arrive(0, kTag, next0++), nullptr);
  }
  EXPECT_EQ(peers, (std::vector<int>{0, 1, 0, 0}));
}

TEST(Matching, ParkedCollectiveMessageAgainstTheCurrentOperation) {
  Engine e(3);
  const uint64_t tag = collective_tag(3, 0);
  ASSERT_EQ(e.arrive(1, tag, 0, 0, collective_fp(OpKind::allreduce, 3)), nullptr);
  ASSERT_EQ(e.arrive(2, tag, 0, 0, collective_fp(OpKind::allreduce, 5)), nullptr);  // later: fine
  ASSERT_EQ(e.arrive(2, kTag, 0), nullptr);  // point-to-point: never checked
  EXPECT_EQ(e.matcher().parked_collectives(), 2);

  // The same call: fine everywhere.
  for (int p = 0; p < e.size(); ++p) {
    EXPECT_TRUE(e.q(p).check_parked(0, collective_fp(OpKind::allreduce, 3)).ok());
  }
  // Another call with the same sequence number: peer 1's message is a mismatch.
  Status st = e.q(1).check_parked(0, collective_fp(OpKind::broadcast, 3));
  EXPECT_EQ(st.code(), ErrorCode::mismatch);
  EXPECT_NE(st.message().find("rank 0 called broadcast #3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1 called allreduce #3"), std::string::npos) << st.message();
  EXPECT_TRUE(e.q(2).check_parked(0, collective_fp(OpKind::broadcast, 3)).ok());
  // This rank moved past sequence 3 without receiving peer 1's message.
  st = e.q(1).check_parked(0, collective_fp(OpKind::allreduce, 4));
  EXPECT_EQ(st.code(), ErrorCode::mismatch);
  EXPECT_NE(st.message().find("never received"), std::string::npos) << st.message();
}

TEST(Matching, EraseIfVisitsEachOnceInOrderAndKeepsTheRest) {
  Engine e(1);
  Requests rs;
  std::vector<Request*> posted;
  for (int i = 0; i < 5; ++i) {
    posted.push_back(rs.make(0, p2p_tag(static_cast<uint32_t>(i))));
    EXPECT_FALSE(e.post(posted.back()));
  }
  std::vector<Request*> seen;
  EXPECT_EQ(e.q(0).erase_posted_if([&](Request* r) {
    seen.push_back(r);
    return r == posted[1] || r == posted[3];
  }),
            2u);
  EXPECT_EQ(seen, posted);
  EXPECT_EQ(e.arrive(0, p2p_tag(1), 0), nullptr);  // its receive was erased
  EXPECT_EQ(e.arrive(0, p2p_tag(4), 0), posted[4]);

  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(e.arrive(0, collective_tag(1, 0), i, 10, collective_fp(OpKind::allreduce, 1)),
              nullptr);
  }
  std::vector<int> visited;
  EXPECT_EQ(e.q(0).erase_parked_if([&](Parked<Msg>& a) {
    if (a.tag != collective_tag(1, 0)) return false;
    visited.push_back(a.arrival.seq);
    return a.arrival.seq % 2 == 0;
  }),
            2u);
  EXPECT_EQ(visited, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(e.matcher().parked_collectives(), 2);
  EXPECT_EQ(e.q(0).staged_bytes(), 20u);
  std::optional<Msg> m = e.post(rs.make(0, collective_tag(1, 0)));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 1);
}

TEST(Matching, DrainOnFailReturnsEachReceiveAndArrivalOnce) {
  Engine e(3);
  Requests rs;
  std::set<Request*> posted;
  std::set<PeerSeq> parked;
  for (int p = 0; p < 3; ++p) {
    for (int i = 0; i < 3; ++i) {
      Request* r = rs.make(p, p2p_tag(static_cast<uint32_t>(10 + i)));
      EXPECT_FALSE(e.post(r));
      posted.insert(r);
      EXPECT_EQ(e.arrive(p, collective_tag(2, static_cast<uint32_t>(i)), i, 8,
                         collective_fp(OpKind::allreduce, 2)),
                nullptr);
      parked.insert({p, i});
    }
  }
  std::set<Request*> any;
  for (int i = 0; i < 2; ++i) {
    Request* r = rs.make(kAnyPeer, p2p_tag(20));
    EXPECT_FALSE(e.post_any(r));
    any.insert(r);
  }
  EXPECT_EQ(e.matcher().staged_bytes(), 9u * 8);

  std::multiset<Request*> got_posted;
  std::multiset<PeerSeq> got_parked;
  for (int p = 0; p < 3; ++p) {
    MutexLock lock(e.mu(p));
    auto d = e.q(p).drain();
    for (Request* r : d.posted) got_posted.insert(r);
    for (const Parked<Msg>& a : d.parked) {
      EXPECT_EQ(a.arrival.peer, p);
      got_parked.insert({a.arrival.peer, a.arrival.seq});
    }
    EXPECT_EQ(e.q(p).posted_count(), 0u);
    EXPECT_EQ(e.q(p).parked_count(), 0u);
    EXPECT_EQ(e.q(p).staged_bytes(), 0u);
  }
  const std::vector<Request*> got_any = e.matcher().close_any();
  EXPECT_EQ(got_posted, std::multiset<Request*>(posted.begin(), posted.end()));
  EXPECT_EQ(got_parked, std::multiset<PeerSeq>(parked.begin(), parked.end()));
  EXPECT_EQ(std::multiset<Request*>(got_any.begin(), got_any.end()),
            std::multiset<Request*>(any.begin(), any.end()));
  EXPECT_EQ(e.matcher().parked_collectives(), 0);
  EXPECT_EQ(e.matcher().staged_bytes(), 0u);
  EXPECT_EQ(e.matcher().any_posted(), 0u);

  // After close_any, a receive from any peer is refused (the transport fails it) and later
  // arrivals find no any-source receive.
  AnyPost res{};
  EXPECT_FALSE(e.post_any(rs.make(kAnyPeer, p2p_tag(20)), &res));
  EXPECT_EQ(res, AnyPost::closed);
  EXPECT_TRUE(e.matcher().close_any().empty());
  EXPECT_EQ(e.arrive(1, p2p_tag(20), 0), nullptr);
}

TEST(Matching, StagedBytesFollowParkedArrivals) {
  Engine e(2);
  Requests rs;
  ASSERT_EQ(e.arrive(0, kTag, 0, 100), nullptr);
  ASSERT_EQ(e.arrive(0, kTag, 1, 50), nullptr);
  ASSERT_EQ(e.arrive(1, kTag, 0, 30), nullptr);
  ASSERT_EQ(e.arrive(1, kOtherTag, 0, 0), nullptr);  // a rendezvous header holds no bytes
  EXPECT_EQ(e.q(0).staged_bytes(), 150u);
  EXPECT_EQ(e.q(1).staged_bytes(), 30u);
  EXPECT_EQ(e.matcher().staged_bytes(), 180u);
  EXPECT_EQ(e.matcher().staged_peak(), 180u);

  ASSERT_TRUE(e.post(rs.make(0, kTag)));  // takes the 100 bytes
  EXPECT_EQ(e.q(0).staged_bytes(), 50u);
  EXPECT_EQ(e.matcher().staged_bytes(), 80u);
  ASSERT_TRUE(e.post_any(rs.make(kAnyPeer, kTag)));  // the first over all peers: peer 0's 50
  EXPECT_EQ(e.q(0).staged_bytes(), 0u);
  EXPECT_EQ(e.matcher().staged_bytes(), 30u);
  {
    // A payload matched while still arriving stays counted until it is delivered.
    MutexLock lock(e.mu(1));
    std::optional<Parked<Msg>> a = e.q(1).take_parked(kTag);
    ASSERT_TRUE(a);
    EXPECT_EQ(e.q(1).staged_bytes(), 0u);
    e.q(1).hold_staged(a->staged);
    EXPECT_EQ(e.q(1).staged_bytes(), 30u);
    EXPECT_EQ(e.matcher().staged_bytes(), 30u);
    e.q(1).release_staged(a->staged);
  }
  EXPECT_EQ(e.matcher().staged_bytes(), 0u);
  EXPECT_EQ(e.matcher().staged_peak(), 180u);
}

// A receive that refuses the message it took (TCP: size or operation disagree) puts it back: it
// is again the oldest of its tag for the next receive, keeps its place in the arrival order over
// all peers, and its counters are as before.
TEST(Matching, PutBackRestoresARefusedArrival) {
  Engine e(2);
  Requests rs;
  ASSERT_EQ(e.arrive(1, kTag, 0, 40), nullptr);
  ASSERT_EQ(e.arrive(0, kTag, 0, 10), nullptr);
  ASSERT_EQ(e.arrive(1, kTag, 1, 20), nullptr);
  ASSERT_EQ(e.arrive(1, collective_tag(1, 0), 0, 0, collective_fp(OpKind::allreduce, 1)), nullptr);
  EXPECT_EQ(e.matcher().parked_collectives(), 1);
  {
    MutexLock lock(e.mu(1));
    std::optional<Parked<Msg>> a = e.q(1).take_parked(kTag);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->arrival.seq, 0);
    EXPECT_EQ(e.q(1).staged_bytes(), 20u);
    e.q(1).put_back(std::move(*a));
    EXPECT_EQ(e.q(1).staged_bytes(), 60u);
    std::optional<Parked<Msg>> c = e.q(1).take_parked(collective_tag(1, 0));
    ASSERT_TRUE(c);
    EXPECT_EQ(e.matcher().parked_collectives(), 0);
    e.q(1).put_back(std::move(*c));
    EXPECT_EQ(e.matcher().parked_collectives(), 1);
  }
  EXPECT_EQ(e.matcher().staged_bytes(), 70u);
  // Still the first arrival over all peers, then peer 0's, then its own second message.
  std::optional<Msg> m = e.post_any(rs.make(kAnyPeer, kTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->peer, 1);
  EXPECT_EQ(m->seq, 0);
  m = e.post_any(rs.make(kAnyPeer, kTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->peer, 0);
  m = e.post(rs.make(1, kTag));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 1);
  EXPECT_EQ(e.matcher().staged_bytes(), 0u);
}

// Several threads post receives (for one peer, and from any peer) while one thread per peer
// delivers that peer's messages, each under that peer's lock (as a reactor would). Every
// message is taken at most once and every receive at most once; what is left at the end cannot
// match (no arrival and receive missed each other); receives posted by one thread take one
// peer's messages of one tag in the order that peer sent them. A few rounds with other seeds:
// a race shows in some interleavings only.
void stress_round(unsigned seed) {
  constexpr int kPeers = 4;
  constexpr int kPerTag = 1500;  // messages per (peer, tag)
  const uint64_t kCollective = collective_tag(9, 1);
  const uint64_t kSpecific = p2p_tag(1);  // only receives for one peer
  const uint64_t kMixed = p2p_tag(2);     // receives for one peer and from any peer
  const std::vector<uint64_t> tags = {kCollective, kSpecific, kMixed};
  const Fingerprint coll_fp = collective_fp(OpKind::allreduce, 9);

  Engine e(kPeers);
  auto msg_index = [&](int peer, size_t tag_index, int seq) {
    return (static_cast<size_t>(peer) * tags.size() + tag_index) * kPerTag +
           static_cast<size_t>(seq);
  };
  const size_t messages = static_cast<size_t>(kPeers) * tags.size() * kPerTag;
  std::vector<std::atomic<int>> taken(messages);  // times each message was matched

  // Receives, made up front; Request::msg_id (transport-private) holds the receive's number.
  constexpr int kThreads = 3;  // 0: kCollective + kSpecific; 1, 2: kMixed
  std::vector<std::deque<Request>> reqs(kThreads);
  std::vector<std::vector<Request*>> order(kThreads);  // each thread's posting order
  std::mt19937 plan(seed);
  for (int i = 0; i < kPerTag; ++i) {
    for (int p = 0; p < kPeers; ++p) {
      for (uint64_t tag : {kCollective, kSpecific}) {
        Request& r = reqs[0].emplace_back();
        r.peer = p;
        r.tag = tag;
        order[0].push_back(&r);
      }
    }
  }
  for (int t = 1; t < kThreads; ++t) {
    for (int i = 0; i < kPeers * kPerTag / 2; ++i) {
      Request& r = reqs[t].emplace_back();
      r.tag = kMixed;
      r.peer = plan() % 2 == 0 ? kAnyPeer : static_cast<int>(plan() % kPeers);
      order[t].push_back(&r);
    }
  }
  // Shuffle thread 0's order across (peer, tag) pairs while keeping each pair's own order.
  {
    std::vector<Request*>& o = order[0];
    std::vector<std::deque<Request*>> per(static_cast<size_t>(kPeers) * 2);
    for (Request* r : o) per[static_cast<size_t>(r->peer) * 2 + (r->tag == kSpecific)].push_back(r);
    o.clear();
    while (o.size() < static_cast<size_t>(kPeers) * 2 * kPerTag) {
      auto& d = per[plan() % per.size()];
      if (d.empty()) continue;
      o.push_back(d.front());
      d.pop_front();
    }
  }
  uint64_t id = 0;
  for (auto& o : order) {
    for (Request* r : o) r->msg_id = id++;
  }
  std::vector<std::atomic<int>> matched(id);  // times each receive was matched
  std::vector<std::atomic<int64_t>> got(id);  // the message index it took
  auto record = [&](Request* r, const Msg& m, uint64_t tag) {
    const size_t ti = static_cast<size_t>(std::find(tags.begin(), tags.end(), tag) - tags.begin());
    const size_t mi = msg_index(m.peer, ti, m.seq);
    taken[mi].fetch_add(1, std::memory_order_relaxed);
    matched[r->msg_id].fetch_add(1, std::memory_order_relaxed);
    got[r->msg_id].store(static_cast<int64_t>(mi), std::memory_order_relaxed);
  };

  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (Request* r : order[static_cast<size_t>(t)]) {
        if (r->peer == kAnyPeer) {
          const AnyPost res = e.matcher().post_any(r, [&](Queues&, Parked<Msg>&& a) {
            EXPECT_EQ(r->peer, a.arrival.peer);
            record(r, a.arrival, a.tag);
          });
          EXPECT_NE(res, AnyPost::closed);
          continue;
        }
        MutexLock lock(e.mu(r->peer));
        if (std::optional<Parked<Msg>> a = e.q(r->peer).post(r)) record(r, a->arrival, a->tag);
      }
    });
  }
  for (int p = 0; p < kPeers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(seed * 31 + static_cast<unsigned>(p));
      std::vector<int> next(tags.size(), 0);
      while (!go.load()) std::this_thread::yield();
      int left = static_cast<int>(tags.size()) * kPerTag;
      while (left > 0) {
        const size_t ti = rng() % tags.size();
        if (next[ti] == kPerTag) continue;
        const int seq = next[ti]++;
        --left;
        const uint64_t tag = tags[ti];
        MutexLock lock(e.mu(p));
        Request* r = e.q(p).arrive(tag, [&] {
          return Parked<Msg>{.tag = tag,
                             .fp = tag == kCollective ? coll_fp : p2p_fp(),
                             .bytes = 8,
                             .staged = 8,
                             .arrival = Msg{p, seq}};
        });
        if (r != nullptr) {
          EXPECT_TRUE(r->peer == p) << "receive for " << r->peer << " took peer " << p;
          record(r, Msg{p, seq}, tag);
        }
      }
    });
  }
  // Meanwhile, a "begin_operation" looks at every peer's parked collective messages, and a
  // look with every peer lock held (in post_any's order) finds no parked message that a waiting
  // receive could take (only kMixed has receives from any peer).
  std::atomic<bool> stop{false};
  std::atomic<int> missed{0};
  std::thread checker([&] {
    while (!go.load()) std::this_thread::yield();
    while (!stop.load()) {
      for (int p = 0; p < kPeers; ++p) e.mu(p).lock();
      const bool any_waiting = e.matcher().any_posted() != 0;
      for (int p = 0; p < kPeers; ++p) {
        EXPECT_TRUE(e.q(p).check_parked(0, coll_fp).ok());
        // Linear in the queues' lengths (they reach thousands): the tags with a waiting
        // receive, then the parked messages against them.
        std::vector<uint64_t> waiting_tags;
        e.q(p).for_each_posted([&](const Request& r) {
          if (std::find(waiting_tags.begin(), waiting_tags.end(), r.tag) == waiting_tags.end()) {
            waiting_tags.push_back(r.tag);
          }
        });
        e.q(p).for_each_parked([&](const Parked<Msg>& a) {
          if (any_waiting && a.tag == kMixed) missed.fetch_add(1);
          if (std::find(waiting_tags.begin(), waiting_tags.end(), a.tag) != waiting_tags.end()) {
            missed.fetch_add(1);
          }
        });
      }
      for (int p = kPeers - 1; p >= 0; --p) e.mu(p).unlock();
      // Leave the locks to the workers for a while: a checker that takes them back at once
      // starves them (under sanitizers the round then takes minutes).
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  go.store(true);
  for (std::thread& t : threads) t.join();
  stop.store(true);
  checker.join();

  EXPECT_EQ(missed.load(), 0) << "a parked message and a receive that could take it coexisted";
  // At most once each.
  for (size_t i = 0; i < messages; ++i) ASSERT_LE(taken[i].load(), 1) << "message " << i;
  for (uint64_t i = 0; i < id; ++i) ASSERT_LE(matched[i].load(), 1) << "receive " << i;

  // What is left: drained once, and nothing in it could have matched.
  std::vector<Request*> left_posted;
  std::vector<Parked<Msg>> left_parked;
  for (int p = 0; p < kPeers; ++p) {
    MutexLock lock(e.mu(p));
    auto d = e.q(p).drain();
    left_posted.insert(left_posted.end(), d.posted.begin(), d.posted.end());
    for (auto& a : d.parked) left_parked.push_back(std::move(a));
  }
  const std::vector<Request*> left_any = e.matcher().close_any();
  for (const Parked<Msg>& a : left_parked) {
    for (Request* r : left_posted) {
      ASSERT_FALSE(r->peer == a.arrival.peer && r->tag == a.tag)
          << "a receive for peer " << r->peer << " and a message from it missed each other";
    }
    for (Request* r : left_any) {
      ASSERT_FALSE(r->tag == a.tag) << "a receive from any peer and a message missed each other";
    }
  }
  size_t taken_total = 0;
  for (size_t i = 0; i < messages; ++i) taken_total += static_cast<size_t>(taken[i].load());
  EXPECT_EQ(taken_total + left_parked.size(), messages);
  size_t matched_total = 0;
  for (uint64_t i = 0; i < id; ++i) matched_total += static_cast<size_t>(matched[i].load());
  EXPECT_EQ(matched_total + left_posted.size() + left_any.size(), id);
  for (Request* r : left_posted) EXPECT_EQ(matched[r->msg_id].load(), 0);
  for (Request* r : left_any) EXPECT_EQ(matched[r->msg_id].load(), 0);
  // Only the mixed tag can be left over (its receives for one peer and from any peer may split
  // the peers' messages differently); the others match completely.
  for (const Parked<Msg>& a : left_parked) EXPECT_EQ(a.tag, kMixed);
  EXPECT_EQ(e.matcher().staged_bytes(), 0u);
  EXPECT_EQ(e.matcher().parked_collectives(), 0);

  // Order: each thread's receives take each peer's messages of a tag in the order it sent them
  // (thread 0 is the only poster of its tags: its k-th receive for (peer, tag) takes message k).
  for (int t = 0; t < kThreads; ++t) {
    std::vector<int64_t> last(static_cast<size_t>(kPeers) * tags.size(), -1);
    std::vector<int> count(static_cast<size_t>(kPeers) * tags.size(), 0);
    for (Request* r : order[static_cast<size_t>(t)]) {
      if (matched[r->msg_id].load() == 0) continue;
      const int64_t mi = got[r->msg_id].load();
      const size_t key = static_cast<size_t>(mi) / kPerTag;  // peer * tags + tag index
      const int seq = static_cast<int>(static_cast<size_t>(mi) % kPerTag);
      ASSERT_GT(seq, last[key]) << "thread " << t << " took a later message first";
      if (t == 0) ASSERT_EQ(seq, count[key]);
      last[key] = seq;
      ++count[key];
    }
  }
}

TEST(MatchingStress, ConcurrentPostsAndArrivalsUnderPeerLocks) {
  for (unsigned seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    stress_round(seed);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

}  // namespace
}  // namespace weft
