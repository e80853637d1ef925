// Revoke, agree, shrink and grow through the public API, ranks as threads over TCP and over
// shared memory. A rank that dies for real (SIGKILL, SIGSTOP) is covered by the multi-process
// tests (tests/process/fault_tolerance_process_test.cc); here a failed rank is one that aborted
// and left, which the others find out about through the agreement's timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "multirank/comm_harness.h"

namespace weft {
namespace {

using testing::run_comm_ranks;
using testing::test_options;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class FaultTolerance : public testing::CommunicatorOverEachTransport {};
INSTANTIATE_TEST_SUITE_P(Transports, FaultTolerance,
                         ::testing::Values(TransportKind::tcp, TransportKind::shm),
                         testing::transport_param_name);

// Sum of (rank + 1) over `ranks` old ranks, the value every test's allreduce checks.
float expected_sum(const std::vector<int>& ranks) {
  float s = 0;
  for (int r : ranks) s += static_cast<float>(r + 1);
  return s;
}

TEST_P(FaultTolerance, AgreeReturnsTheAndOfEveryRanksFlagOnEveryRank) {
  run_comm_ranks(4, test_options(), [](Communicator& c) {
    const uint64_t flag = c.rank() == 2 ? ~uint64_t{0b10} : ~uint64_t{0};
    auto a = c.agree(flag);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_EQ(a->flag, ~uint64_t{0b10});
    EXPECT_EQ(a->alive, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(a->failed.empty());
    // A second agreement is a new one, and the communicator still works.
    auto b = c.agree(c.rank() == 0 ? 0 : 1);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->flag, 0u);
    float v = 1;
    ASSERT_TRUE(c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
    EXPECT_EQ(v, 4.0f);
  });
}

TEST_P(FaultTolerance, RevokeEndsEveryRanksPendingOperation) {
  run_comm_ranks(4, test_options(), [](Communicator& c) {
    if (c.rank() == 0) {
      // Never enters the allreduce the others wait in.
      std::this_thread::sleep_for(300ms);
      c.revoke();
      EXPECT_EQ(c.barrier().code(), ErrorCode::revoked);
      return;
    }
    const auto t0 = Clock::now();
    std::vector<float> buf(1000, 1.0f);
    Status st = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::fp32, ReduceOp::sum);
    EXPECT_EQ(st.code(), ErrorCode::revoked) << st.to_string();
    EXPECT_NE(st.message().find("rank 0 revoked the communicator"), std::string::npos)
        << st.message();
    EXPECT_LT(Clock::now() - t0, 20s);  // far below the 60 s timeout
    // Later operations fail at once with the same code.
    EXPECT_EQ(c.barrier().code(), ErrorCode::revoked);
  });
}

TEST_P(FaultTolerance, SurvivorsShrinkAndGoOnWithoutARankThatLeft) {
  Options o = test_options();
  o.timeout = 3s;  // how long the agreement waits for the rank that left
  run_comm_ranks(4, o, [](Communicator& c) {
    const int r = c.rank();
    float v = static_cast<float>(r + 1);
    ASSERT_TRUE(c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
    EXPECT_EQ(v, expected_sum({0, 1, 2, 3}));
    if (r == 2) {
      // Leaves once its last messages of the first allreduce are out (abort drops what is
      // still queued).
      std::this_thread::sleep_for(300ms);
      c.abort("rank 2 leaves the job");
      return;  // never takes part in the shrink
    }
    std::vector<float> buf(4096, static_cast<float>(r + 1));
    Status st = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::fp32, ReduceOp::sum);
    EXPECT_FALSE(st.ok());
    const auto t0 = Clock::now();
    auto smaller = c.shrink();
    ASSERT_TRUE(smaller.ok()) << smaller.status().to_string();
    Communicator& s = *smaller.value();
    EXPECT_LT(Clock::now() - t0, 30s);
    EXPECT_EQ(s.size(), 3);
    EXPECT_EQ(s.rank(), r < 2 ? r : r - 1);  // dense, in the old order
    // The caller's data is untouched; the survivors' allreduce is correct.
    std::vector<float> again(4096, static_cast<float>(r + 1));
    ASSERT_TRUE(s.allreduce(again.data(), again.data(), again.size(), DataType::fp32,
                            ReduceOp::sum).ok());
    for (float x : again) ASSERT_EQ(x, expected_sum({0, 1, 3}));
    ASSERT_TRUE(s.barrier().ok());
  });
}

TEST_P(FaultTolerance, ShrinkOfAHealthyCommunicatorKeepsEveryRank) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    auto s = c.shrink();
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s.value()->size(), 3);
    EXPECT_EQ(s.value()->rank(), c.rank());
    // The old one was revoked by the shrink.
    EXPECT_EQ(c.barrier().code(), ErrorCode::revoked);
    float v = 1;
    ASSERT_TRUE(s.value()->allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
    EXPECT_EQ(v, 3.0f);
  });
}

TEST_P(FaultTolerance, GrowAddsJoiningRanksAfterTheMembers) {
  const Options base = test_options();
  auto store = make_memory_store();
  constexpr int kMembers = 3, kJoiners = 2;
  std::vector<std::thread> threads;
  auto check_grown = [&](Communicator& g, float expected_rank) {
    EXPECT_EQ(g.size(), kMembers + kJoiners);
    EXPECT_EQ(static_cast<float>(g.rank()), expected_rank);
    std::vector<float> v(1000, static_cast<float>(g.rank() + 1));
    ASSERT_TRUE(g.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    for (float x : v) ASSERT_EQ(x, expected_sum({0, 1, 2, 3, 4}));
    // State reaches the new ranks from rank 0.
    int step = g.rank() == 0 ? 41 : -1;
    ASSERT_TRUE(g.broadcast(&step, 1, DataType::int32, 0).ok());
    EXPECT_EQ(step, 41);
  };
  for (int r = 0; r < kMembers; ++r) {
    threads.emplace_back([&, r] {
      Options o = base;
      o.rank = r;
      o.size = kMembers;
      auto comm = Communicator::create(o, store);
      ASSERT_TRUE(comm.ok()) << comm.status().to_string();
      if (r == 0) {
        // The members learn how many wait from rank 0.
        int waiting = 0;
        for (auto t0 = Clock::now(); waiting < kJoiners && Clock::now() - t0 < 30s;) {
          auto n = comm.value()->pending_joins();
          ASSERT_TRUE(n.ok()) << n.status().to_string();
          waiting = n.value();
          if (waiting < kJoiners) std::this_thread::sleep_for(10ms);
        }
        EXPECT_EQ(waiting, kJoiners);
      }
      auto grown = comm.value()->grow(kJoiners);
      ASSERT_TRUE(grown.ok()) << grown.status().to_string();
      check_grown(*grown.value(), static_cast<float>(r));
      EXPECT_EQ(comm.value()->pending_joins().value(), 0);
    });
  }
  std::atomic<int> joined{0};
  for (int j = 0; j < kJoiners; ++j) {
    threads.emplace_back([&] {
      auto comm = Communicator::join(base, store);
      ASSERT_TRUE(comm.ok()) << comm.status().to_string();
      const int r = comm.value()->rank();
      EXPECT_GE(r, kMembers);
      ++joined;
      check_grown(*comm.value(), static_cast<float>(r));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(joined.load(), kJoiners);
}

TEST_P(FaultTolerance, GrowWithoutJoinersFailsOnEveryMemberInBoundedTime) {
  Options o = test_options();
  o.connect_timeout = 1s;
  run_comm_ranks(2, o, [](Communicator& c) {
    const auto t0 = Clock::now();
    auto g = c.grow(1);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), ErrorCode::timeout) << g.status().to_string();
    EXPECT_NE(g.status().message().find("0 of 1 joining rank(s) arrived"), std::string::npos)
        << g.status().message();
    EXPECT_LT(Clock::now() - t0, 15s);
    EXPECT_EQ(c.grow(0).status().code(), ErrorCode::invalid_argument);
  });
}

}  // namespace
}  // namespace weft
