// The public Communicator over TCP on loopback and over shared memory, ranks as threads: every collective through the
// C++ API (blocking and async), point-to-point matching, flow control, split, and the error
// paths (mismatch, timeout, abort, bad arguments) that must end in an error, never a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include <time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "multirank/comm_harness.h"

namespace weft {
namespace {

using testing::run_comm_ranks;
using testing::test_options;
using Clock = std::chrono::steady_clock;

class CommunicatorTest : public testing::CommunicatorOverEachTransport {};
INSTANTIATE_TEST_SUITE_P(Transports, CommunicatorTest,
                         ::testing::Values(TransportKind::tcp, TransportKind::shm),
                         testing::transport_param_name);

TEST_P(CommunicatorTest, EveryCollectiveThroughThePublicApi) {
  for (int n : {1, 2, 3, 4}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    run_comm_ranks(n, test_options(), [n](Communicator& c) {
      const int r = c.rank();
      const size_t count = 1001;
      std::vector<float> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r + 1) * (i % 7);
      ASSERT_TRUE(c.allreduce(in.data(), out.data(), count, DataType::fp32, ReduceOp::sum).ok());
      float ranks_sum = n * (n + 1) / 2.0f;
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], ranks_sum * (i % 7));

      std::vector<int32_t> b(count, r == n - 1 ? 42 : 0);
      ASSERT_TRUE(c.broadcast(b.data(), count, DataType::int32, n - 1).ok());
      EXPECT_EQ(b[count - 1], 42);

      std::vector<int64_t> mine(5, r), all(5 * n);
      ASSERT_TRUE(c.allgather(mine.data(), all.data(), 5, DataType::int64).ok());
      for (int p = 0; p < n; ++p) EXPECT_EQ(all[5 * p + 4], p);

      std::vector<double> rs_in(3 * n, 1.0), rs_out(3);
      ASSERT_TRUE(c.reduce_scatter(rs_in.data(), rs_out.data(), 3, DataType::fp64, ReduceOp::sum).ok());
      EXPECT_EQ(rs_out[2], n);

      std::vector<int32_t> red(4, r), red_out(4, -1);
      ASSERT_TRUE(c.reduce(red.data(), red_out.data(), 4, DataType::int32, ReduceOp::max, 0).ok());
      if (r == 0) EXPECT_EQ(red_out[3], n - 1);

      std::vector<uint8_t> g(2, static_cast<uint8_t>(r)), gall(2 * n);
      ASSERT_TRUE(c.gather(g.data(), gall.data(), 2, DataType::uint8, 0).ok());
      if (r == 0) {
        for (int p = 0; p < n; ++p) EXPECT_EQ(gall[2 * p], p);
      }
      std::vector<uint8_t> sc(2 * n), sc_out(2);
      for (int p = 0; p < n; ++p) sc[2 * p] = sc[2 * p + 1] = static_cast<uint8_t>(10 + p);
      ASSERT_TRUE(c.scatter(sc.data(), sc_out.data(), 2, DataType::uint8, 0).ok());
      EXPECT_EQ(sc_out[1], 10 + r);

      std::vector<int32_t> a2a(n), a2a_out(n);
      for (int p = 0; p < n; ++p) a2a[p] = 100 * r + p;
      ASSERT_TRUE(c.alltoall(a2a.data(), a2a_out.data(), 1, DataType::int32).ok());
      for (int p = 0; p < n; ++p) EXPECT_EQ(a2a_out[p], 100 * p + r);

      // allgatherv: rank p contributes p+1 elements.
      std::vector<size_t> counts(n), displs(n);
      size_t total = 0;
      for (int p = 0; p < n; ++p) {
        counts[p] = p + 1;
        displs[p] = total;
        total += counts[p];
      }
      std::vector<int32_t> v_in(r + 1, r), v_out(total, -1);
      ASSERT_TRUE(c.allgatherv(v_in.data(), r + 1, v_out.data(), counts, displs, DataType::int32).ok());
      for (int p = 0; p < n; ++p) EXPECT_EQ(v_out[displs[p] + p], p);

      // alltoallv: rank r sends p+1 elements to rank p.
      std::vector<size_t> sc_counts(n), sd(n), rc(n), rd(n);
      size_t st = 0, rt = 0;
      for (int p = 0; p < n; ++p) {
        sc_counts[p] = p + 1;
        sd[p] = st;
        st += p + 1;
        rc[p] = r + 1;
        rd[p] = rt;
        rt += r + 1;
      }
      std::vector<int32_t> av_in(st), av_out(rt, -1);
      for (int p = 0; p < n; ++p) {
        for (size_t k = 0; k < sc_counts[p]; ++k) av_in[sd[p] + k] = 1000 * r + p;
      }
      ASSERT_TRUE(c.alltoallv(av_in.data(), sc_counts, sd, av_out.data(), rc, rd, DataType::int32).ok());
      for (int p = 0; p < n; ++p) EXPECT_EQ(av_out[rd[p]], 1000 * p + r);

      ASSERT_TRUE(c.barrier().ok());
    });
  }
}

TEST_P(CommunicatorTest, EveryAsyncCollectiveQueuedAtOnce) {
  // All eleven *_async collectives issued back to back before any wait: they run in call order
  // and each Work reports its own result and times.
  for (int n : {1, 3, 4}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    run_comm_ranks(n, test_options(), [n](Communicator& c) {
      const int r = c.rank();
      const size_t count = 777;
      std::vector<float> ar_in(count, static_cast<float>(r + 1)), ar_out(count, -1);
      std::vector<int32_t> bc(count, r == n - 1 ? 42 : 0);
      std::vector<int32_t> red(4, r), red_out(4, -1);
      std::vector<int64_t> ag_in(5, r), ag_out(5 * n, -1);
      std::vector<size_t> counts(n), displs(n);
      size_t total = 0;
      for (int p = 0; p < n; ++p) {
        counts[p] = p + 1;
        displs[p] = total;
        total += counts[p];
      }
      std::vector<int32_t> agv_in(r + 1, r), agv_out(total, -1);
      std::vector<double> rs_in(3 * n, 1.5), rs_out(3, -1);
      std::vector<uint8_t> g(2, static_cast<uint8_t>(r)), g_out(2 * n, 0);
      std::vector<uint8_t> sc(2 * n), sc_out(2, 0);
      for (int p = 0; p < n; ++p) sc[2 * p] = sc[2 * p + 1] = static_cast<uint8_t>(10 + p);
      std::vector<int32_t> a2a(n), a2a_out(n, -1);
      for (int p = 0; p < n; ++p) a2a[p] = 100 * r + p;
      std::vector<size_t> ones(n, 1), iota(n);
      std::iota(iota.begin(), iota.end(), size_t{0});
      std::vector<int32_t> a2av_out(n, -1);

      std::vector<std::pair<const char*, WorkPtr>> works;
      works.emplace_back("allreduce", c.allreduce_async(ar_in.data(), ar_out.data(), count,
                                                        DataType::fp32, ReduceOp::sum));
      works.emplace_back("broadcast", c.broadcast_async(bc.data(), count, DataType::int32, n - 1));
      works.emplace_back("reduce", c.reduce_async(red.data(), red_out.data(), 4, DataType::int32,
                                                  ReduceOp::max, 0));
      works.emplace_back("allgather", c.allgather_async(ag_in.data(), ag_out.data(), 5,
                                                        DataType::int64));
      works.emplace_back("allgatherv", c.allgatherv_async(agv_in.data(), r + 1, agv_out.data(),
                                                          counts, displs, DataType::int32));
      works.emplace_back("reduce_scatter",
                         c.reduce_scatter_async(rs_in.data(), rs_out.data(), 3, DataType::fp64,
                                                ReduceOp::sum));
      works.emplace_back("gather", c.gather_async(g.data(), g_out.data(), 2, DataType::uint8, 0));
      works.emplace_back("scatter", c.scatter_async(sc.data(), sc_out.data(), 2, DataType::uint8, 0));
      works.emplace_back("alltoall", c.alltoall_async(a2a.data(), a2a_out.data(), 1, DataType::int32));
      works.emplace_back("alltoallv", c.alltoallv_async(a2a.data(), ones, iota, a2av_out.data(),
                                                        ones, iota, DataType::int32));
      works.emplace_back("barrier", c.barrier_async());
      Clock::time_point previous_end{};
      for (auto& [name, w] : works) {
        SCOPED_TRACE(name);
        ASSERT_TRUE(w->wait().ok()) << w->status().to_string();
        EXPECT_TRUE(w->test());
        EXPECT_TRUE(w->status().ok());
        EXPECT_NE(w->start_time(), Clock::time_point{});
        EXPECT_LE(w->start_time(), w->end_time());
        EXPECT_LE(previous_end, w->start_time());  // one after the other, in call order
        previous_end = w->end_time();
      }
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(ar_out[i], n * (n + 1) / 2.0f);
      EXPECT_EQ(bc[count - 1], 42);
      if (r == 0) EXPECT_EQ(red_out[3], n - 1);
      for (int p = 0; p < n; ++p) EXPECT_EQ(ag_out[5 * p + 4], p);
      for (int p = 0; p < n; ++p) EXPECT_EQ(agv_out[displs[p] + p], p);
      EXPECT_EQ(rs_out[2], 1.5 * n);
      for (int p = 0; r == 0 && p < n; ++p) EXPECT_EQ(g_out[2 * p + 1], p);
      EXPECT_EQ(sc_out[1], 10 + r);
      for (int p = 0; p < n; ++p) EXPECT_EQ(a2a_out[p], 100 * p + r);
      for (int p = 0; p < n; ++p) EXPECT_EQ(a2av_out[p], 100 * p + r);
    });
  }
}

TEST_P(CommunicatorTest, WaitWithATimeoutReturnsTimeoutAndLeavesTheOperationRunning) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    WorkPtr w = c.allreduce_async(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
    if (c.rank() == 0) {
      const auto started = Clock::now();
      Status early = w->wait(std::chrono::milliseconds(50));
      EXPECT_EQ(early.code(), ErrorCode::timeout) << early.to_string();
      EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(50));
      EXPECT_FALSE(w->test());
      EXPECT_TRUE(w->status().ok());  // still running: no final status yet
    }
    ASSERT_TRUE(w->wait().ok());
    EXPECT_EQ(v[999], 2.0f);
  });
}

TEST_P(CommunicatorTest, AsyncCollectiveReturnsBeforeItCompletes) {
  // Rank 1 joins a second late: rank 0's allreduce_async must hand back its Work at once (the
  // caller computes meanwhile), not after the allreduce is done.
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    std::vector<float> v(4096, 1.0f);
    if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const auto called = Clock::now();
    WorkPtr w = c.allreduce_async(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
    if (c.rank() == 0) EXPECT_LT(Clock::now() - called, std::chrono::milliseconds(700));
    ASSERT_TRUE(w->wait().ok()) << w->status().to_string();
    EXPECT_EQ(v[4095], 2.0f);
  });
}

TEST_P(CommunicatorTest, AsyncOperationsRunInCallOrder) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    constexpr int kOps = 20;
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(50000, 1.0f));
    std::vector<WorkPtr> works;
    for (int i = 0; i < kOps; ++i) {
      works.push_back(c.allreduce_async(bufs[i].data(), bufs[i].data(), bufs[i].size(),
                                        DataType::fp32, ReduceOp::sum));
    }
    for (auto& w : works) {
      ASSERT_TRUE(w->wait().ok());
      EXPECT_TRUE(w->test());
      EXPECT_LE(w->start_time(), w->end_time());
    }
    for (auto& b : bufs) EXPECT_EQ(b[49999], 3.0f);
  });
}

// Nobody waits: the executor starts queued collectives by itself (after its short alarm), so
// callers that only test() while they compute see them finish.
TEST_P(CommunicatorTest, AsyncCollectivesFinishWithoutAWaiter) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    for (int round = 0; round < 20; ++round) {
      std::vector<float> v(1000 * (round + 1), 1.0f);
      WorkPtr w = c.allreduce_async(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (!w->test() && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 3)));
      }
      ASSERT_TRUE(w->test()) << "round " << round << ": never started without a waiter";
      EXPECT_TRUE(w->status().ok()) << w->status().to_string();
      EXPECT_EQ(v.back(), 3.0f);
    }
  });
}

// wait() without a timeout on a collective the executor has not started runs it on the waiting
// thread (no hand-off); on_done runs once, on whichever thread finished it, with its status.
TEST_P(CommunicatorTest, WaitRunsAQueuedCollectiveAndOnDoneReportsIt) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    constexpr int kOps = 50;
    int on_waiter = 0;
    for (int i = 0; i < kOps; ++i) {
      float v = 1.0f;
      WorkPtr w = c.allreduce_async(&v, &v, 1, DataType::fp32, ReduceOp::sum);
      std::atomic<int> calls{0};
      std::atomic<bool> ok{false};
      std::thread::id finisher;
      ASSERT_TRUE(w->on_done([&](const Status& st) {
        finisher = std::this_thread::get_id();
        ok = st.ok();
        calls.fetch_add(1);
      }));
      ASSERT_TRUE(w->wait().ok());
      // finish() marks the Work done, then calls on_done: another thread may still be in it.
      while (calls.load() == 0) std::this_thread::yield();
      EXPECT_EQ(calls.load(), 1);
      EXPECT_TRUE(ok.load());
      EXPECT_EQ(v, 2.0f);
      if (finisher == std::this_thread::get_id()) ++on_waiter;
      // Registered on a finished Work: called at once, here.
      std::thread::id late;
      ASSERT_TRUE(w->on_done([&](const Status& st) {
        late = std::this_thread::get_id();
        EXPECT_TRUE(st.ok());
      }));
      EXPECT_EQ(late, std::this_thread::get_id());
    }
    // The executor waits 50 us before it takes work; a waiter that comes at once gets there
    // first, short of this thread being descheduled that long every time.
    EXPECT_GT(on_waiter, 0) << "no collective ran on the waiting thread in " << kOps;
    // Point-to-point operations complete in the transport: no on_done.
    float x = 1.0f, y = 0.0f;
    const int peer = 1 - c.rank();
    WorkPtr r = c.recv_async(&y, sizeof y, peer, 7);
    WorkPtr s = c.send_async(&x, sizeof x, peer, 7);
    EXPECT_FALSE(s->on_done([](const Status&) { ADD_FAILURE() << "called for a send"; }));
    ASSERT_TRUE(s->wait().ok());
    ASSERT_TRUE(r->wait().ok());
    EXPECT_EQ(y, 1.0f);
  });
}

// A receive queued behind a running collective, waited on before it is posted: the waiter learns
// the receive's deadline when the executor posts it, so a receive nobody sends to still ends with
// the operation's timeout (not with the waiter's own, much later one).
TEST_P(CommunicatorTest, WaitOnAQueuedReceiveStillTimesOut) {
  Options o = test_options();
  o.timeout = std::chrono::seconds(1);
  std::atomic<bool> rank0_done{false};
  run_comm_ranks(2, o, [&](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    if (c.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
      const auto limit = Clock::now() + std::chrono::seconds(30);
      while (!rank0_done && Clock::now() < limit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;  // never sends tag 99
    }
    WorkPtr w = c.allreduce_async(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
    std::thread helper([&] { EXPECT_TRUE(w->wait().ok()); });  // runs it (or the executor does)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    float x = 0.0f;
    WorkPtr r = c.recv_async(&x, sizeof x, 1, 99);  // queued: the allreduce is running
    const auto t0 = Clock::now();
    Status st = r->wait(std::chrono::seconds(20));
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.message().find("Work::wait: Timed out"), std::string::npos) << st.message();
    helper.join();
    rank0_done = true;
  });
}

// A collective that fails (the peer aborts) reports the failure to on_done.
TEST_P(CommunicatorTest, OnDoneGetsTheFailure) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    if (c.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      c.abort("test abort");
      return;
    }
    std::vector<float> v(1000, 1.0f);
    WorkPtr w = c.allreduce_async(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
    std::atomic<int> calls{0};
    Status seen;
    ASSERT_TRUE(w->on_done([&](const Status& st) {
      seen = st;
      calls.fetch_add(1);
    }));
    EXPECT_FALSE(w->wait().ok());
    while (calls.load() == 0) std::this_thread::yield();
    EXPECT_EQ(calls.load(), 1);
    EXPECT_FALSE(seen.ok());
    EXPECT_NE(seen.message().find("rank 1"), std::string::npos) << seen.message();
  });
}

TEST_P(CommunicatorTest, PointToPointLargeAndSmallInBothDirections) {
  Options o = test_options();
  o.eager_threshold = 1024;
  run_comm_ranks(2, o, [](Communicator& c) {
    int peer = 1 - c.rank();
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{1000}, size_t{5000}, size_t{3} << 20}) {
      std::vector<uint8_t> out(bytes, static_cast<uint8_t>(c.rank() + 1)), in(bytes, 0);
      // Both ranks send first: must not deadlock even when the message needs rendezvous.
      auto s = c.send_async(out.data(), bytes, peer, 7);
      ASSERT_TRUE(c.recv(in.data(), bytes, peer, 7).ok());
      ASSERT_TRUE(s->wait().ok());
      if (bytes > 0) EXPECT_EQ(in[bytes - 1], peer + 1);
    }
  });
}

TEST_P(CommunicatorTest, ReceivesMayBePostedInAnotherOrderThanSends) {
  Options o = test_options();
  o.eager_threshold = 4096;
  run_comm_ranks(2, o, [](Communicator& c) {
    std::vector<int32_t> a(1 << 20, 1), b(1 << 20, 2), small(10, 3);
    if (c.rank() == 0) {
      auto w1 = c.send_async(a.data(), a.size() * 4, 1, 1);
      auto w2 = c.send_async(small.data(), small.size() * 4, 1, 2);
      auto w3 = c.send_async(b.data(), b.size() * 4, 1, 3);
      ASSERT_TRUE(w1->wait().ok());
      ASSERT_TRUE(w2->wait().ok());
      ASSERT_TRUE(w3->wait().ok());
    } else {
      std::vector<int32_t> ra(a.size()), rb(b.size()), rs(10);
      ASSERT_TRUE(c.recv(rb.data(), rb.size() * 4, 0, 3).ok());
      ASSERT_TRUE(c.recv(rs.data(), rs.size() * 4, 0, 2).ok());
      ASSERT_TRUE(c.recv(ra.data(), ra.size() * 4, 0, 1).ok());
      EXPECT_EQ(ra.back(), 1);
      EXPECT_EQ(rb.back(), 2);
      EXPECT_EQ(rs.back(), 3);
    }
  });
}

TEST_P(CommunicatorTest, SenderFarAheadStaysWithinCreditsAndLosesNothing) {
  Options o = test_options();
  o.eager_threshold = 16 * 1024;
  o.eager_credit_bytes = 64 * 1024;  // only 4 eager messages may be parked at the receiver
  const bool tcp = GetParam() == TransportKind::tcp;
  run_comm_ranks(2, o, [tcp](Communicator& c) {
    constexpr int kMessages = 200;
    if (c.rank() == 0) {
      std::vector<std::vector<int32_t>> msgs(kMessages, std::vector<int32_t>(4096));
      std::vector<WorkPtr> works;
      for (int i = 0; i < kMessages; ++i) {
        std::fill(msgs[i].begin(), msgs[i].end(), i);
        works.push_back(c.send_async(msgs[i].data(), msgs[i].size() * 4, 1, 5));
      }
      for (auto& w : works) ASSERT_TRUE(w->wait().ok());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the sender run ahead
      std::vector<int32_t> in(4096);
      for (int i = 0; i < kMessages; ++i) {
        ASSERT_TRUE(c.recv(in.data(), in.size() * 4, 0, 5).ok());
        ASSERT_EQ(in[0], i);  // same tag: arrival order is send order
        ASSERT_EQ(in[4095], i);
      }
      if (tcp) {
        // The messages that arrived before their receives were held within the credit.
        const auto record = nlohmann::json::parse(c.flight_record_json());
        const uint64_t peak = record["transport_counters"]["tcp_unexpected_bytes_peak"];
        EXPECT_GT(peak, 0u);
        EXPECT_LE(peak, 64u * 1024);
      }
    }
  });
}

// Between collectives the reactor does not read (the next operation does); point-to-point
// traffic that follows must still complete, whether it arrived while this rank was idle or
// arrives while it sleeps in the receive, eager or rendezvous, and collectives after it too.
TEST_P(CommunicatorTest, PointToPointAfterCollectivesWithIdleGaps) {
  Options o = test_options();
  o.eager_threshold = 4096;
  run_comm_ranks(3, o, [](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    EXPECT_EQ(v[999], 3.0f);
    for (size_t bytes : {size_t{100}, size_t{1} << 20}) {
      std::vector<uint8_t> out(bytes, 7), in(bytes, 0);
      if (c.rank() == 1) {
        // Sent while rank 0 is idle (its data sits in the socket), then while it waits.
        ASSERT_TRUE(c.send(out.data(), bytes, 0, 1).ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ASSERT_TRUE(c.send(out.data(), bytes, 0, 2).ok());
      } else if (c.rank() == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ASSERT_TRUE(c.recv(in.data(), bytes, 1, 1).ok());
        EXPECT_EQ(in[bytes - 1], 7);
        in.assign(bytes, 0);
        ASSERT_TRUE(c.recv(in.data(), bytes, 1, 2).ok());
        EXPECT_EQ(in[bytes - 1], 7);
      }
      ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    }
    EXPECT_EQ(v[0], 27.0f);
  });
}

// kAnySource takes messages from whichever rank sent them: parked before the receive was
// posted, arriving after it (eager and rendezvous), and from oneself; Work::source() names the
// sender.
TEST_P(CommunicatorTest, ReceiveFromAnySource) {
  Options o = test_options();
  o.eager_threshold = 1024;
  run_comm_ranks(4, o, [](Communicator& c) {
    const int n = c.size();
    // Parked: every other rank sends before rank 0 posts anything.
    int32_t mine = 100 + c.rank();
    if (c.rank() != 0) {
      ASSERT_TRUE(c.send(&mine, sizeof(mine), 0, 5).ok());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::set<int> seen;
      for (int i = 1; i < n; ++i) {
        int32_t v = 0;
        int src = -1;
        ASSERT_TRUE(c.recv(&v, sizeof(v), kAnySource, 5, &src).ok());
        EXPECT_EQ(v, 100 + src);
        seen.insert(src);
      }
      EXPECT_EQ(seen, (std::set<int>{1, 2, 3}));
    }
    // Posted first, rendezvous-sized: the senders start after the barrier.
    std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(16384, -1));
    std::vector<WorkPtr> works;
    if (c.rank() == 0) {
      for (int i = 1; i < n; ++i) {
        works.push_back(c.recv_async(in[i].data(), in[i].size() * 4, kAnySource, 6));
      }
    }
    ASSERT_TRUE(c.barrier().ok());
    if (c.rank() != 0) {
      std::vector<int32_t> out(16384, c.rank());
      ASSERT_TRUE(c.send(out.data(), out.size() * 4, 0, 6).ok());
    } else {
      std::set<int> seen;
      for (int i = 1; i < n; ++i) {
        ASSERT_TRUE(works[i - 1]->wait().ok());
        int src = works[i - 1]->source();
        EXPECT_EQ(in[i][0], src);
        EXPECT_EQ(in[i][16383], src);
        seen.insert(src);
      }
      EXPECT_EQ(seen, (std::set<int>{1, 2, 3}));
      // From oneself.
      auto s = c.send_async(&mine, sizeof(mine), 0, 7);
      int32_t v = 0;
      int src = -1;
      ASSERT_TRUE(c.recv(&v, sizeof(v), kAnySource, 7, &src).ok());
      ASSERT_TRUE(s->wait().ok());
      EXPECT_EQ(src, 0);
      EXPECT_EQ(v, 100);
      EXPECT_EQ(s->source(), -1);  // not a receive
    }
    ASSERT_TRUE(c.barrier().ok());
  });
}

// The order rules of transport/matching.h, which every transport follows: a message takes the
// receive posted first among those that accept it (a receive from any rank posted before one
// naming the sender takes the sender's first message), and a receive from any rank takes the
// parked message that arrived first, whichever rank sent it.
TEST_P(CommunicatorTest, AnySourceReceivesMatchInPostingOrder) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    int32_t token = 0;
    if (c.rank() == 0) {
      int32_t first = -1, second = -1;
      WorkPtr any = c.recv_async(&first, sizeof(first), kAnySource, 8);
      WorkPtr named = c.recv_async(&second, sizeof(second), 1, 8);
      ASSERT_TRUE(c.send(&token, sizeof(token), 1, 13).ok());  // both are posted: go
      ASSERT_TRUE(any->wait().ok());
      ASSERT_TRUE(named->wait().ok());
      EXPECT_EQ(first, 1);
      EXPECT_EQ(second, 2);
      EXPECT_EQ(any->source(), 1);
    } else {
      ASSERT_TRUE(c.recv(&token, sizeof(token), 0, 13).ok());
      for (int32_t v : {1, 2}) ASSERT_TRUE(c.send(&v, sizeof(v), 0, 8).ok());
    }
  });
}

TEST_P(CommunicatorTest, AnySourceTakesTheEarliestArrivalFirst) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    int32_t token = 0;
    const int32_t mine = 100 + c.rank();
    if (c.rank() == 2) {
      // Arrives first: rank 0 sees the message behind it (same sender, in order) before rank 1
      // is told to send.
      ASSERT_TRUE(c.send(&mine, sizeof(mine), 0, 9).ok());
      ASSERT_TRUE(c.send(&token, sizeof(token), 0, 10).ok());
    } else if (c.rank() == 1) {
      ASSERT_TRUE(c.recv(&token, sizeof(token), 0, 11).ok());
      ASSERT_TRUE(c.send(&mine, sizeof(mine), 0, 9).ok());
      ASSERT_TRUE(c.send(&token, sizeof(token), 0, 12).ok());
    } else {
      ASSERT_TRUE(c.recv(&token, sizeof(token), 2, 10).ok());  // rank 2's tag 9 is parked
      ASSERT_TRUE(c.send(&token, sizeof(token), 1, 11).ok());
      ASSERT_TRUE(c.recv(&token, sizeof(token), 1, 12).ok());  // and now rank 1's
      int32_t v = 0;
      int src = -1;
      ASSERT_TRUE(c.recv(&v, sizeof(v), kAnySource, 9, &src).ok());
      EXPECT_EQ(src, 2);  // the earlier arrival, though rank 1 is the lower rank
      EXPECT_EQ(v, 102);
      ASSERT_TRUE(c.recv(&v, sizeof(v), kAnySource, 9, &src).ok());
      EXPECT_EQ(src, 1);
      EXPECT_EQ(v, 101);
    }
  });
}

TEST_P(CommunicatorTest, SendToSelf) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    int v = 40 + c.rank(), got = 0;
    auto s = c.send_async(&v, sizeof(v), c.rank(), 1);
    ASSERT_TRUE(c.recv(&got, sizeof(got), c.rank(), 1).ok());
    ASSERT_TRUE(s->wait().ok());
    EXPECT_EQ(got, v);
  });
}

TEST_P(CommunicatorTest, ManySocketsAndReactors) {
  Options o = test_options();
  o.sockets_per_peer = 4;
  o.reactor_threads = 2;
  o.eager_threshold = 1024;
  o.interface = "lo";
  o.transport = TransportKind::tcp;  // sockets are what this test is about
  o.host_id = "";  // per rank below: every rank "on its own host", so pairs use 4 sockets
  run_comm_ranks(4, o, [](Communicator& c) {
    std::vector<float> buf(3 << 20, 1.0f);
    ASSERT_TRUE(c.allreduce(buf.data(), buf.data(), buf.size(), DataType::fp32, ReduceOp::sum).ok());
    EXPECT_EQ(buf.front(), 4.0f);
    EXPECT_EQ(buf.back(), 4.0f);
  });
}

TEST_P(CommunicatorTest, SplitByParity) {
  run_comm_ranks(5, test_options(), [](Communicator& c) {
    auto sub = c.split(c.rank() % 2, -c.rank());  // reverse order inside each group
    ASSERT_TRUE(sub.ok()) << sub.status().to_string();
    ASSERT_TRUE(sub.value());
    Communicator& s = *sub.value();
    int expected_size = c.rank() % 2 == 0 ? 3 : 2;
    EXPECT_EQ(s.size(), expected_size);
    int v = c.rank(), sum = 0;
    ASSERT_TRUE(s.allreduce(&v, &sum, 1, DataType::int32, ReduceOp::sum).ok());
    EXPECT_EQ(sum, c.rank() % 2 == 0 ? 0 + 2 + 4 : 1 + 3);
    int top = c.rank();
    ASSERT_TRUE(s.broadcast(&top, 1, DataType::int32, 0).ok());
    EXPECT_EQ(top, c.rank() % 2 == 0 ? 4 : 3);  // key -rank: the highest rank is new rank 0
    auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none.value() == nullptr, c.rank() == 0);
  });
}

TEST_P(CommunicatorTest, MismatchedCollectivesFailOnEveryRankNamingBothCalls) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    std::vector<float> buf(100, 1.0f);
    Status st = c.rank() == 1 ? c.broadcast(buf.data(), buf.size(), DataType::fp32, 0)
                              : c.allreduce(buf.data(), buf.data(), buf.size(), DataType::fp32,
                                            ReduceOp::sum);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ErrorCode::mismatch) << st.to_string();
    EXPECT_NE(st.message().find("broadcast"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("allreduce"), std::string::npos) << st.message();
    // The communicator stays broken with the same error.
    EXPECT_FALSE(c.barrier().ok());
  });
}

TEST_P(CommunicatorTest, MismatchedCountsFail) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    std::vector<int32_t> buf(200, 1);
    size_t count = c.rank() == 0 ? 100 : 200;
    Status st = c.allreduce(buf.data(), buf.data(), count, DataType::int32, ReduceOp::sum);
    EXPECT_EQ(st.code(), ErrorCode::mismatch) << st.to_string();
    EXPECT_NE(st.message().find("x 100"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("x 200"), std::string::npos) << st.message();
  });
}

TEST_P(CommunicatorTest, MissingRankTimesOutNamingTheOperation) {
  Options o = test_options();
  o.timeout = std::chrono::milliseconds(1500);
  std::atomic<bool> done{false};
  run_comm_ranks(2, o, [&](Communicator& c) {
    if (c.rank() == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;  // never called the collective
    }
    float v = 1;
    auto t0 = Clock::now();
    Status st = c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum);
    auto waited = Clock::now() - t0;
    done = true;
    EXPECT_EQ(st.code(), ErrorCode::timeout) << st.to_string();
    EXPECT_NE(st.message().find("allreduce #1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
    EXPECT_GE(waited, std::chrono::milliseconds(1400));
    EXPECT_LT(waited, std::chrono::seconds(15));
  });
}

// Over shared memory, small calls of every collective but alltoallv run through the shared
// buffers (the flight record says so) and give the right results; a forced algorithm wins; a
// payload too large for the buffers runs the size-based choice. Over TCP they never do.
TEST_P(CommunicatorTest, SmallCollectivesOverShmRunThroughSharedBuffers) {
  const bool shm = GetParam() == TransportKind::shm;
  Options o = test_options();
  o.set_algorithm(OpKind::broadcast, Algorithm::binomial);
  run_comm_ranks(3, o, [&](Communicator& c) {
    const int r = c.rank();
    std::vector<double> v(4, r + 1.0), out(4);
    ASSERT_TRUE(c.allreduce(v.data(), out.data(), 4, DataType::fp64, ReduceOp::avg).ok());
    EXPECT_EQ(out[3], 2.0);
    std::vector<int32_t> all(3 * 2), mine(2, r);
    ASSERT_TRUE(c.allgather(mine.data(), all.data(), 2, DataType::int32).ok());
    EXPECT_EQ(all, (std::vector<int32_t>{0, 0, 1, 1, 2, 2}));
    std::vector<int32_t> b(3, r == 2 ? 7 : 0);
    ASSERT_TRUE(c.broadcast(b.data(), 3, DataType::int32, 2).ok());
    EXPECT_EQ(b[2], 7);
    std::vector<float> big(8192, 1.0f);  // 32 KiB: more than a shared buffer holds
    ASSERT_TRUE(c.allreduce(big.data(), big.data(), big.size(), DataType::fp32, ReduceOp::sum).ok());
    EXPECT_EQ(big[8191], 3.0f);
    ASSERT_TRUE(c.barrier().ok());
    auto doc = nlohmann::json::parse(c.flight_record_json());
    const auto& e = doc["entries"];
    ASSERT_EQ(e.size(), 5u);
    EXPECT_EQ(e[0]["algorithm"], shm ? "shm_direct" : "recursive_doubling");
    EXPECT_EQ(e[1]["algorithm"], shm ? "shm_direct" : "recursive_doubling");
    EXPECT_EQ(e[2]["algorithm"], "binomial");  // forced
    EXPECT_EQ(e[3]["algorithm"], "recursive_doubling");  // the message path
    EXPECT_EQ(e[4]["algorithm"], shm ? "shm_direct" : "dissemination");
  });
}

// The flight recorder lists every operation with its state; when one fails, the record lands in
// diag_dir with the failed operation and the error.
TEST_P(CommunicatorTest, FlightRecordNamesTheFailedOperationInDiagDir) {
  Options o = test_options();
  o.timeout = std::chrono::milliseconds(1000);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("weft_diag_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  o.diag_dir = dir.string();
  std::atomic<bool> done{false};
  run_comm_ranks(2, o, [&](Communicator& c) {
    std::vector<float> v(100, 1.0f);
    ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    ASSERT_TRUE(c.barrier().ok());
    auto first = nlohmann::json::parse(c.flight_record_json());
    ASSERT_EQ(first["entries"].size(), 2u);
    EXPECT_EQ(first["entries"][0]["describe"], "allreduce #1 (f32 x 100, sum)");
    EXPECT_EQ(first["entries"][0]["state"], "done");
    EXPECT_EQ(first["entries"][1]["op"], "barrier");
    if (c.rank() == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;  // never calls the second allreduce
    }
    Status st = c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::max);
    done = true;
    EXPECT_EQ(st.code(), ErrorCode::timeout);
    const auto file = dir / ("weft-flight-rank0-pid" + std::to_string(::getpid()) + ".json");
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    std::ifstream in(file);
    auto doc = nlohmann::json::parse(in);
    EXPECT_EQ(doc["rank"], 0);
    ASSERT_EQ(doc["entries"].size(), 3u);
    const auto& last = doc["entries"][2];
    EXPECT_EQ(last["describe"], "allreduce #3 (f32 x 100, max)");
    EXPECT_EQ(last["state"], "failed");
    EXPECT_NE(last["error"].get<std::string>().find(" Timed out "), std::string::npos);
  });
  std::filesystem::remove_all(dir);
}

// A timeout says who is behind: the ranks that wait in the collective publish where they are
// through the store, and the rank that never called it is named.
TEST_P(CommunicatorTest, TimeoutNamesTheRankThatHasNotEnteredTheCollective) {
  Options o = test_options();
  o.timeout = std::chrono::milliseconds(1000);
  std::atomic<int> finished{0};
  run_comm_ranks(3, o, [&](Communicator& c) {
    if (c.rank() == 1) {
      while (finished.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;  // never calls the allreduce
    }
    std::vector<float> v(1000, 1.0f);
    Status st = c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
    ++finished;
    EXPECT_EQ(st.code(), ErrorCode::timeout);
    EXPECT_NE(st.message().find("rank 1 has not entered allreduce #1 (f32 x 1000, sum) or is not "
                                "responding (ranks 0,2 waiting in it since 1.0 s)"),
              std::string::npos)
        << st.message();
  });
}

TEST_P(CommunicatorTest, AbortEndsThePeersPendingOperation) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    if (c.rank() == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      c.abort("test abort");
      EXPECT_EQ(c.barrier().code(), ErrorCode::aborted);
      return;
    }
    auto t0 = Clock::now();
    std::vector<float> buf(1000, 1.0f);
    Status st = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::fp32, ReduceOp::sum);
    EXPECT_FALSE(st.ok());
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));  // far below the 60 s timeout
    EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.message();
  });
}

// A rank blocked waiting for a late peer sleeps: oversubscribed jobs (more ranks than cores)
// depend on it. Its thread's CPU time stays far below the time it waited.
TEST_P(CommunicatorTest, BlockedRankSleepsInsteadOfSpinning) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    float v = 1;
    if (c.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      ASSERT_TRUE(c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
      return;
    }
    timespec cpu0{}, cpu1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    auto t0 = Clock::now();
    ASSERT_TRUE(c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
    double cpu = (cpu1.tv_sec - cpu0.tv_sec) + (cpu1.tv_nsec - cpu0.tv_nsec) * 1e-9;
    EXPECT_GT(wall, 1.0);
    EXPECT_LT(cpu, 0.2 * wall) << "cpu " << cpu << " s while blocked " << wall << " s";
  });
}

TEST_P(CommunicatorTest, BadArgumentsFailBeforeSendingAnything) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    float v = 0;
    EXPECT_EQ(c.allreduce(nullptr, &v, 1, DataType::fp32, ReduceOp::sum).code(),
              ErrorCode::invalid_argument);
    Status st = c.broadcast(&v, 1, DataType::fp32, 7);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
    EXPECT_NE(st.message().find("root 7"), std::string::npos) << st.message();
    EXPECT_EQ(c.send(&v, 4, 9, 0).code(), ErrorCode::invalid_argument);
    std::vector<size_t> counts(1, 1), displs(1, 0);  // wrong length for 2 ranks
    EXPECT_EQ(c.allgatherv(&v, 1, &v, counts, displs, DataType::fp32).code(),
              ErrorCode::invalid_argument);
    // Nothing was sent: the communicator still works.
    EXPECT_TRUE(c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
  });
}

}  // namespace
}  // namespace weft
