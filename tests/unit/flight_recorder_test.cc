// FlightRecorder: bounded ring, state transitions, point-to-point states read from the Work,
// JSON and the pending summary.
#include "core/flight_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/work_impl.h"

namespace weft {
namespace {

FlightEntry collective(uint64_t seq) {
  FlightEntry e;
  e.kind = OpKind::allreduce;
  e.dtype = DataType::fp32;
  e.count = 1024;
  e.seq = seq;
  e.queued = FlightEntry::Clock::now();
  return e;
}

TEST(FlightRecorder, KeepsTheMostRecentEntriesInOrder) {
  FlightRecorder r(4);
  for (uint64_t s = 1; s <= 10; ++s) {
    uint64_t id = r.add(collective(s));
    EXPECT_EQ(id, s);
    r.mark_running(id, FlightEntry::Clock::now());
    r.mark_ended(id, Status());
  }
  r.mark_ended(2, Status(ErrorCode::timeout, "late"));  // overwritten long ago: ignored
  auto snap = r.snapshot();
  ASSERT_EQ(snap.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(snap[i].seq, 7 + i);
    EXPECT_EQ(snap[i].state, FlightEntry::State::done);
  }
}

TEST(FlightRecorder, AlgorithmSettledWhenTheOperationRuns) {
  FlightRecorder r(4);
  const auto now = FlightEntry::Clock::now();
  uint64_t id = r.add_collective(OpKind::allreduce, DataType::fp32, ReduceOp::sum, -1, 8, 1,
                                 Algorithm::hierarchical, now, false);
  r.set_algorithm(id, Algorithm::ring);
  r.mark_ended(id, Status());
  r.set_algorithm(id, Algorithm::binomial);  // ended: ignored
  auto snap = r.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_STREQ(snap[0].algorithm, "ring");
}

TEST(FlightRecorder, ReportsWhatIsStillInFlightAndWhy) {
  FlightRecorder r(16);
  uint64_t a = r.add(collective(1));
  r.mark_running(a, FlightEntry::Clock::now());
  r.mark_ended(a, Status(ErrorCode::timeout, "rank 0: allreduce #1 timed out"));
  uint64_t b = r.add(collective(2));
  r.mark_running(b, FlightEntry::Clock::now());
  r.add(collective(3));
  EXPECT_EQ(r.pending_summary().find("allreduce #2 (f32 x 1024, sum) running for"), 0u)
      << r.pending_summary();
  EXPECT_NE(r.pending_summary().find("allreduce #3 (f32 x 1024, sum) queued for"),
            std::string::npos);
  auto doc = nlohmann::json::parse(r.to_json(3, 8));
  EXPECT_EQ(doc["rank"], 3);
  EXPECT_EQ(doc["size"], 8);
  ASSERT_EQ(doc["entries"].size(), 3u);
  EXPECT_EQ(doc["entries"][0]["state"], "failed");
  EXPECT_EQ(doc["entries"][0]["error"], "timeout: rank 0: allreduce #1 timed out");
  EXPECT_EQ(doc["entries"][1]["state"], "running");
  EXPECT_EQ(doc["entries"][2]["state"], "queued");
  EXPECT_EQ(doc["entries"][2]["seq"], 3);
  EXPECT_LE(doc["entries"][2]["queued_s"].get<double>(), 0.0);
}

TEST(FlightRecorder, PointToPointStateComesFromTheWork) {
  FlightRecorder r(8);
  auto work = std::make_shared<WorkImpl>();
  FlightEntry e;
  e.kind = OpKind::recv;
  e.count = 64;
  e.peer = -1;
  e.tag = 9;
  e.work = work;
  uint64_t id = r.add(std::move(e));
  r.mark_running(id, FlightEntry::Clock::now());
  EXPECT_EQ(r.snapshot()[0].state, FlightEntry::State::running);
  EXPECT_NE(r.pending_summary().find("recv of 64 bytes from any rank (tag 9) running"),
            std::string::npos);
  work->finish(Status(ErrorCode::peer_lost, "gone"));
  EXPECT_EQ(r.snapshot()[0].state, FlightEntry::State::failed);
  EXPECT_EQ(r.pending_summary(), "no operation in flight");
}

TEST(FlightRecorder, OpenOperationsAreNeverOverwritten) {
  FlightRecorder r(4);
  std::vector<uint64_t> ids;
  for (uint64_t s = 1; s <= 4; ++s) ids.push_back(r.add(collective(s)));  // all still queued
  // A fifth would take the slot of the first, which is still open: it is not recorded.
  EXPECT_EQ(r.add(collective(5)), 0u);
  r.mark_ended(ids[0], Status());
  const uint64_t next = r.add(collective(6));
  EXPECT_NE(next, 0u);
  auto snap = r.snapshot();
  ASSERT_EQ(snap.size(), 4u);
  EXPECT_EQ(snap[0].seq, 2u);
  EXPECT_EQ(snap[3].seq, 6u);
  EXPECT_EQ(snap[3].state, FlightEntry::State::queued);
}

TEST(FlightRecorder, CapacityIsRoundedUpToAPowerOfTwo) {
  FlightRecorder r(5);
  for (uint64_t s = 1; s <= 20; ++s) r.mark_ended(r.add(collective(s)), Status());
  EXPECT_EQ(r.snapshot().size(), 8u);
}

// Writers (one submitting, one ending) and a reader taking snapshots at the same time: every
// snapshot is consistent (TSan checks the rest).
TEST(FlightRecorder, SnapshotsWhileOperationsAreRecorded) {
  FlightRecorder r(64);
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      for (const FlightEntry& e : r.snapshot()) {
        ASSERT_EQ(e.kind, OpKind::allreduce);
        ASSERT_EQ(e.count, 1024u);
        if (e.state == FlightEntry::State::failed) ASSERT_EQ(e.error, "timeout: late");
      }
      (void)r.to_json(0, 1);
    }
  });
  for (uint64_t s = 1; s <= 20000; ++s) {
    const uint64_t id = r.add_collective(OpKind::allreduce, DataType::fp32, ReduceOp::sum, -1,
                                         1024, s, Algorithm::ring, FlightEntry::Clock::now(), true);
    r.mark_ended(id, s % 100 == 0 ? Status(ErrorCode::timeout, "late") : Status());
  }
  stop = true;
  reader.join();
  EXPECT_EQ(r.snapshot().back().seq, 20000u);
}

TEST(FlightRecorder, CapacityZeroRecordsNothing) {
  FlightRecorder r(0);
  EXPECT_EQ(r.add(collective(1)), 0u);
  r.mark_running(0, FlightEntry::Clock::now());
  EXPECT_TRUE(r.snapshot().empty());
  EXPECT_EQ(nlohmann::json::parse(r.to_json(0, 1))["entries"].size(), 0u);
}

}  // namespace
}  // namespace weft
