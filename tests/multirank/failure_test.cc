// Error paths of the collective layer: mismatched calls end in ErrorCode::mismatch naming both
// calls, a missing rank ends in ErrorCode::timeout naming it within the timeout, fail() during a
// wait ends every waiting rank promptly, and a broken transport fails later operations at once.
// None of them may hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "multirank/harness.h"

namespace weft::harness {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

CollectiveArgs allreduce_args(std::vector<float>& in, std::vector<float>& out, size_t count) {
  in.assign(count, 1.0f);
  out.assign(count, 0.0f);
  CollectiveArgs a;
  a.kind = OpKind::allreduce;
  a.dtype = DataType::fp32;
  a.op = ReduceOp::sum;
  a.count = count;
  a.send = in.data();
  a.recv = out.data();
  return a;
}

bool contains(const Status& s, std::string_view text) {
  return s.message().find(text) != std::string::npos;
}

class Mismatch : public ::testing::TestWithParam<std::string> {};

TEST_P(Mismatch, DifferentCountsInARing) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(fmt::format("n={}", n));
    RankGroup g(transport_factory(GetParam()), n);
    Options options = harness_options();
    options.set_algorithm(OpKind::allreduce, Algorithm::ring);
    std::vector<std::vector<float>> in(4), out(4);
    const auto start = Clock::now();
    auto st = g.collective_all(
        [&](int r) {
          return allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)],
                                r == 0 ? 5 : 6);
        },
        options);
    EXPECT_LT(Clock::now() - start, milliseconds(3000));
    for (int r = 0; r < n; ++r) EXPECT_FALSE(st[static_cast<size_t>(r)].ok()) << "rank " << r;
    // Rank 0 and its ring neighbours exchange messages under the two different fingerprints.
    for (int r : {0, 1, n - 1}) {
      const Status& s = st[static_cast<size_t>(r)];
      EXPECT_EQ(s.code(), ErrorCode::mismatch) << s.to_string();
      EXPECT_TRUE(contains(s, "allreduce #1 (f32 x 5, sum)")) << s.to_string();
      EXPECT_TRUE(contains(s, "allreduce #1 (f32 x 6, sum)")) << s.to_string();
      EXPECT_TRUE(contains(s, "rank 0 called") || contains(s, "but rank 0 called"))
          << s.to_string();
    }
    // The others end too: with the mismatch, or because a rank that hit it stopped.
    for (int r = 2; r < n; ++r) {
      const ErrorCode c = st[static_cast<size_t>(r)].code();
      EXPECT_TRUE(c == ErrorCode::mismatch || c == ErrorCode::peer_lost)
          << st[static_cast<size_t>(r)].to_string();
    }
  }
}

TEST_P(Mismatch, DifferentKinds) {
  RankGroup g(transport_factory(GetParam()), 3);
  const Options options = harness_options();
  std::vector<std::vector<float>> in(3), out(3);
  auto st = g.collective_all(
      [&](int r) {
        CollectiveArgs a =
            allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 4);
        if (r == 1) {
          a.kind = OpKind::broadcast;
          a.root = 0;
        }
        return a;
      },
      options);
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(st[static_cast<size_t>(r)].ok()) << "rank " << r;
  EXPECT_EQ(st[1].code(), ErrorCode::mismatch) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "broadcast #1 (f32 x 4, root 0)")) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "allreduce #1 (f32 x 4, sum)")) << st[1].to_string();
}

// The early message waits unmatched; begin_operation on the late rank must catch it.
TEST_P(Mismatch, CaughtWhenTheOperationBegins) {
  RankGroup g(transport_factory(GetParam()), 2);
  Options options = harness_options();
  options.set_algorithm(OpKind::allreduce, Algorithm::direct);
  std::vector<std::vector<float>> in(2), out(2);
  std::vector<Status> st(2);
  g.run([&](int r) {
    CollectiveArgs a = allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 8);
    if (r == 1) {
      std::this_thread::sleep_for(milliseconds(50));
      a.op = ReduceOp::max;
    }
    st[static_cast<size_t>(r)] = g.collective(r, a, options);
  });
  EXPECT_EQ(st[1].code(), ErrorCode::mismatch) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "rank 0 called allreduce #1 (f32 x 8, sum)")) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "rank 1 called allreduce #1 (f32 x 8, max)")) << st[1].to_string();
  EXPECT_FALSE(st[0].ok());
}

// Pairwise counts that disagree: same fingerprint, different byte counts.
TEST_P(Mismatch, AlltoallvByteCounts) {
  RankGroup g(transport_factory(GetParam()), 2);
  const Options options = harness_options();
  std::vector<std::vector<int32_t>> bufs(2, std::vector<int32_t>(16, 0)), outs = bufs;
  auto st = g.collective_all(
      [&](int r) {
        CollectiveArgs a;
        a.kind = OpKind::alltoallv;
        a.dtype = DataType::int32;
        a.send = bufs[static_cast<size_t>(r)].data();
        a.recv = outs[static_cast<size_t>(r)].data();
        a.send_counts = {2, r == 0 ? size_t{3} : size_t{2}};
        a.send_displs = {0, 4};
        a.recv_counts = {2, 2};
        a.recv_displs = {0, 4};
        return a;
      },
      options);
  // Rank 1 receives the wrong size; rank 0's own exchange was fine, so it may even succeed.
  EXPECT_EQ(st[1].code(), ErrorCode::mismatch) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "12 bytes") && contains(st[1], "8 bytes")) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "rank 0") && contains(st[1], "rank 1")) << st[1].to_string();
  EXPECT_TRUE(st[0].ok() || st[0].code() == ErrorCode::mismatch) << st[0].to_string();
}

TEST_P(Mismatch, SkippedSequenceNumber) {
  RankGroup g(transport_factory(GetParam()), 3);
  const Options options = harness_options();
  g.skip_sequence(2);  // rank 2 believes it is one collective further
  std::vector<std::vector<float>> in(3), out(3);
  const auto start = Clock::now();
  Options short_timeout = options;
  short_timeout.timeout = milliseconds(500);
  auto st = g.collective_all(
      [&](int r) {
        return allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 4);
      },
      short_timeout);
  // Rank 2 gets messages of an operation it believes it has left: a mismatch (or, failing that,
  // the ranks time out). Nobody succeeds and nobody hangs.
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(st[static_cast<size_t>(r)].ok());
  EXPECT_EQ(st[2].code(), ErrorCode::mismatch) << st[2].to_string();
  // By messages rank 2 finds messages of #1 it "never received"; through shared buffers whichever
  // rank looks first reports both calls. Either way both are named.
  EXPECT_TRUE(contains(st[2], "allreduce #1 (f32 x 4, sum)")) << st[2].to_string();
  EXPECT_TRUE(contains(st[2], "allreduce #2 (f32 x 4, sum)")) << st[2].to_string();
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

// A small count on one rank and a large one on the other: over shm the first runs through the
// shared buffers and the second by messages. Each side must see the other's call, not time out.
// One `kind` call on 2 ranks, 4 floats on rank 0 and 10000 on rank 1 (root 0); every rank's
// status, which must come well before the 10 s timeout.
std::vector<Status> small_against_large(const std::string& transport, OpKind kind) {
  RankGroup g(transport_factory(transport), 2);
  const Options options = harness_options();
  std::vector<std::vector<float>> in(2), out(2);
  const auto start = Clock::now();
  auto st = g.collective_all(
      [&](int r) {
        CollectiveArgs a = allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)],
                                          r == 0 ? 4 : 10000);
        a.kind = kind;
        a.root = 0;
        return a;
      },
      options);
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
  return st;
}

TEST_P(Mismatch, SmallAgainstLargeCount) {
  const auto st = small_against_large(GetParam(), OpKind::allreduce);
  for (int r = 0; r < 2; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), ErrorCode::mismatch) << s.to_string();
    EXPECT_TRUE(contains(s, "allreduce #1 (f32 x 4, sum)")) << s.to_string();
    EXPECT_TRUE(contains(s, "allreduce #1 (f32 x 10000, sum)")) << s.to_string();
  }
}

// The same where the rank running by messages only waits to receive (a broadcast from rank 0
// that rank 0 runs through its shared buffer): the waiting rank must notice it.
TEST_P(Mismatch, SmallBroadcastAgainstAWaitingReceiver) {
  const auto st = small_against_large(GetParam(), OpKind::broadcast);
  // The root's part may be over before it could tell (its data is out): ok or the mismatch.
  EXPECT_TRUE(st[0].ok() || st[0].code() == ErrorCode::mismatch) << st[0].to_string();
  EXPECT_EQ(st[1].code(), ErrorCode::mismatch) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "broadcast #1 (f32 x 4, root 0)")) << st[1].to_string();
  EXPECT_TRUE(contains(st[1], "broadcast #1 (f32 x 10000, root 0)")) << st[1].to_string();
}

// The algorithms in which every rank waits on every other directly: direct, and over shm the
// shared buffers.
std::vector<Algorithm> all_wait_on_all(const std::string& transport) {
  if (transport == "shm") return {Algorithm::direct, Algorithm::shm_direct};
  return {Algorithm::direct};
}

INSTANTIATE_TEST_SUITE_P(Failure, Mismatch, ::testing::ValuesIn(transport_names()),
                         [](const auto& info) { return info.param; });

class Timeout : public ::testing::TestWithParam<std::string> {};

// Rank 3 never calls. Everyone waits on it directly, so everyone times out naming it.
TEST_P(Timeout, MissingRankIsNamed) {
  for (Algorithm algorithm : all_wait_on_all(GetParam())) {
    SCOPED_TRACE(to_string(algorithm));
    RankGroup g(transport_factory(GetParam()), 4);
    Options options = harness_options();
    options.timeout = milliseconds(300);
    options.set_algorithm(OpKind::allreduce, algorithm);
    std::vector<std::vector<float>> in(4), out(4);
    std::vector<Status> st(4);
    std::vector<Clock::duration> took(4);
    g.run([&](int r) {
      if (r == 3) return;
      const auto start = Clock::now();
      st[static_cast<size_t>(r)] = g.collective(
          r, allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 1024),
          options);
      took[static_cast<size_t>(r)] = Clock::now() - start;
    });
    // A transport may relay the first rank's timeout to the others ("rank 0 reports: ...") before
    // their own deadline; either way each ends with a timeout that names rank 3.
    for (int r = 0; r < 3; ++r) {
      const Status& s = st[static_cast<size_t>(r)];
      EXPECT_EQ(s.code(), ErrorCode::timeout) << s.to_string();
      EXPECT_TRUE(
          contains(s, "allreduce #1 (f32 x 1024, sum) Timed out after 0.3 s waiting for rank 3"))
          << s.to_string();
      EXPECT_GE(took[static_cast<size_t>(r)], milliseconds(250));
      EXPECT_LT(took[static_cast<size_t>(r)], milliseconds(300 + 700));
    }
    bool own = false;  // at least one rank hit its own deadline
    for (int r = 0; r < 3; ++r) {
      own = own || st[static_cast<size_t>(r)].message().starts_with(fmt::format("rank {}: ", r));
    }
    EXPECT_TRUE(own) << "no rank reported its own timeout";
  }
}

// In a ring only rank 3's successor waits on it directly; the others wait on neighbours that
// wait on it. Whichever deadline passes first ends everything: each rank reports a timeout (its
// own or one relayed from a peer) or the loss of a peer that stopped, well within the limit.
TEST_P(Timeout, RingEndsEverywhereInBoundedTime) {
  RankGroup g(transport_factory(GetParam()), 4);
  Options options = harness_options();
  options.timeout = milliseconds(300);
  options.set_algorithm(OpKind::allreduce, Algorithm::ring);
  std::vector<std::vector<float>> in(4), out(4);
  std::vector<Status> st(4);
  const auto start = Clock::now();
  g.run([&](int r) {
    if (r == 3) return;
    st[static_cast<size_t>(r)] = g.collective(
        r, allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 1000), options);
  });
  EXPECT_LT(Clock::now() - start, milliseconds(300 + 1000));
  bool any_timeout = false;
  for (int r = 0; r < 3; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_TRUE(s.code() == ErrorCode::timeout || s.code() == ErrorCode::peer_lost)
        << s.to_string();
    any_timeout =
        any_timeout || contains(s, "allreduce #1 (f32 x 1000, sum) Timed out after 0.3 s");
  }
  EXPECT_TRUE(any_timeout);
}

INSTANTIATE_TEST_SUITE_P(Failure, Timeout, ::testing::ValuesIn(transport_names()),
                         [](const auto& info) { return info.param; });

class FailDuringWait : public ::testing::TestWithParam<std::string> {};

// fail() on the transport of a rank that never called: every rank waiting on it ends as
// peer_lost, long before the timeout, with the reason in the message.
TEST_P(FailDuringWait, AbsentRankFails) {
  for (Algorithm algorithm : all_wait_on_all(GetParam())) {
    SCOPED_TRACE(to_string(algorithm));
    RankGroup g(transport_factory(GetParam()), 3);
    Options options = harness_options();
    options.set_algorithm(OpKind::allreduce, algorithm);
    std::vector<std::vector<float>> in(3), out(3);
    std::vector<Status> st(3);
    const auto start = Clock::now();
    g.run([&](int r) {
      if (r == 2) {
        std::this_thread::sleep_for(milliseconds(100));
        g.transport(2).fail(Status(ErrorCode::aborted, "rank 2: test abort"));
        return;
      }
      st[static_cast<size_t>(r)] = g.collective(
          r, allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 64), options);
    });
    EXPECT_LT(Clock::now() - start, milliseconds(2000));
    // peer_lost where only the requests waiting on rank 2 end (local), or rank 2's own code where
    // the transport relays the failure to every peer (TCP); the reason travels in the message.
    for (int r = 0; r < 2; ++r) {
      const Status& s = st[static_cast<size_t>(r)];
      EXPECT_TRUE(s.code() == ErrorCode::peer_lost || s.code() == ErrorCode::aborted)
          << s.to_string();
      EXPECT_TRUE(contains(s, "test abort")) << s.to_string();
    }
    EXPECT_EQ(g.transport(2).error().code(), ErrorCode::aborted);
  }
}

// fail() from another thread on a rank that is inside a wait: that rank returns the error it was
// failed with; its peers, which wait on it, end too.
TEST_P(FailDuringWait, WaitingRankFails) {
  std::vector<Algorithm> algorithms{Algorithm::ring};
  if (GetParam() == "shm") algorithms.push_back(Algorithm::shm_direct);
  for (Algorithm algorithm : algorithms) {
    SCOPED_TRACE(to_string(algorithm));
    RankGroup g(transport_factory(GetParam()), 3);
    Options options = harness_options();
    options.set_algorithm(OpKind::allreduce, algorithm);
    std::vector<std::vector<float>> in(3), out(3);
    std::vector<Status> st(3);
    const auto start = Clock::now();
    std::thread killer([&] {
      std::this_thread::sleep_for(milliseconds(100));
      g.transport(0).fail(Status(ErrorCode::aborted, "rank 0: test abort"));
    });
    g.run([&](int r) {
      if (r == 2) return;  // keeps ranks 0 and 1 waiting
      st[static_cast<size_t>(r)] = g.collective(
          r, allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 64), options);
    });
    killer.join();
    EXPECT_LT(Clock::now() - start, milliseconds(2000));
    EXPECT_EQ(st[0].code(), ErrorCode::aborted) << st[0].to_string();
    EXPECT_EQ(st[0].message(), "rank 0: test abort");
    EXPECT_FALSE(st[1].ok());
  }
}

TEST_P(FailDuringWait, LaterOperationsFailAtOnce) {
  RankGroup g(transport_factory(GetParam()), 2);
  const Options options = harness_options();
  g.transport(1).fail(Status(ErrorCode::aborted, "rank 1: gone"));
  std::vector<std::vector<float>> in(2), out(2);
  const auto start = Clock::now();
  auto st = g.collective_all(
      [&](int r) {
        return allreduce_args(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], 16);
      },
      options);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  EXPECT_TRUE(st[0].code() == ErrorCode::peer_lost || st[0].code() == ErrorCode::aborted)
      << st[0].to_string();
  EXPECT_TRUE(contains(st[0], "rank 1: gone")) << st[0].to_string();
  EXPECT_EQ(st[1].code(), ErrorCode::aborted) << st[1].to_string();
}

INSTANTIATE_TEST_SUITE_P(Failure, FailDuringWait, ::testing::ValuesIn(transport_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace weft::harness
