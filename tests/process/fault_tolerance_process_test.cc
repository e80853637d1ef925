// Fault tolerance with real processes under `weft run`: a rank SIGKILLed in each collective kind,
// a frozen (SIGSTOPped) rank found by heartbeats, a rank that never enters the collective, a
// revoke, and the elastic training demo (kill, shrink to 3, go on, grow back to 4 with a
// respawned rank). Each test asserts the error, the rank it names and a time bound. The rank
// program is collective_child.cc; the demo is examples/elastic_train.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process/tool_process.h"

namespace weft::test {
namespace {

using std::chrono::milliseconds;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The line rank `r` printed when its operation failed ("" if none).
std::string failure_line(const ToolResult& r, int rank) {
  const std::string prefix = "[" + std::to_string(rank) + "] rank " + std::to_string(rank) + ": failed";
  for (const std::string& line : r.out_lines()) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

class KilledRank : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(KilledRank, EverySurvivorFailsNamingTheDeadRank) {
  const auto& [transport, op] = GetParam();
  ScopedEnv env({{"WEFT_TRANSPORT", transport.c_str()}});
  auto r = run_tool({"run", "-n", "3", "--grace", "20", "--timeout", "60", WEFT_CHILD_PATH, "1",
                     "40", "kill", op});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(r.elapsed, milliseconds(20000)) << r.out << r.err;
  for (int survivor : {0, 2}) {
    const std::string line = failure_line(r, survivor);
    ASSERT_FALSE(line.empty()) << "rank " << survivor << " did not fail:\n" << r.out << r.err;
    // Lost through its own connection/pidfd, or told by the rank that saw it first.
    EXPECT_TRUE(contains(line, "rank 1")) << line;
    EXPECT_TRUE(contains(line, "peer lost")) << line;
  }
  EXPECT_TRUE(contains(r.err, "rank 1: killed by signal 9 (SIGKILL)")) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, KilledRank,
    ::testing::Combine(::testing::Values("tcp", "shm"),
                       ::testing::Values("allreduce", "broadcast", "reduce", "allgather",
                                         "allgatherv", "reduce_scatter", "gather", "scatter",
                                         "alltoall", "alltoallv", "barrier")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

class FrozenRank : public ::testing::TestWithParam<std::string> {};

TEST_P(FrozenRank, HeartbeatsDeclareItFailedLongBeforeTheOperationTimeout) {
  // The operation timeout (60 s) would take far longer than the detection time (1 s).
  ScopedEnv env({{"WEFT_TRANSPORT", GetParam().c_str()},
                 {"WEFT_PEER_TIMEOUT", "1s"},
                 {"WEFT_TIMEOUT", "60s"}});
  auto r = run_tool(
      {"run", "-n", "3", "--grace", "1", "--timeout", "60", WEFT_CHILD_PATH, "2", "400", "stop"});
  EXPECT_EQ(r.exit_code, 7) << r.out << r.err;
  EXPECT_LT(r.elapsed, milliseconds(15000)) << r.out << r.err;
  bool named = false;
  for (int survivor : {0, 1}) {
    const std::string line = failure_line(r, survivor);
    if (line.empty()) continue;  // the launcher may stop it after the first survivor failed
    EXPECT_TRUE(contains(line, "peer lost")) << line;
    EXPECT_TRUE(contains(line, "rank 2")) << line;
    named = named || contains(line, "rank 2 is not responding");
  }
  EXPECT_TRUE(named) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Transports, FrozenRank, ::testing::Values("tcp", "shm"));

TEST(FaultTolerance, RankThatNeverEntersTheCollectiveIsNamed) {
  ScopedEnv env({{"WEFT_TIMEOUT", "2s"}});
  auto r = run_tool(
      {"run", "-n", "3", "--grace", "1", "--timeout", "60", WEFT_CHILD_PATH, "2", "40", "absent"});
  EXPECT_EQ(r.exit_code, 7) << r.out << r.err;
  EXPECT_LT(r.elapsed, milliseconds(20000)) << r.out << r.err;
  // Rank 2 is alive (its heartbeats go on) but sleeps instead of calling allreduce #21.
  bool named = false;
  for (int survivor : {0, 1}) {
    const std::string line = failure_line(r, survivor);
    if (line.empty()) continue;
    EXPECT_TRUE(contains(line, " Timed out ")) << line;
    named = named || contains(line, "rank 2 has not entered allreduce #21");
  }
  EXPECT_TRUE(named) << r.out;
}

TEST(FaultTolerance, RevokeOnOneRankEndsEveryRanksOperation) {
  auto r = run_tool(
      {"run", "-n", "3", "--grace", "20", "--timeout", "60", WEFT_CHILD_PATH, "2", "40", "revoke"});
  EXPECT_LT(r.elapsed, milliseconds(20000)) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "[2] rank 2: revoked; next operation: revoked: rank 2 revoked the "
                              "communicator"))
      << r.out;
  for (int survivor : {0, 1}) {
    const std::string line = failure_line(r, survivor);
    ASSERT_FALSE(line.empty()) << r.out << r.err;
    EXPECT_TRUE(contains(line, "revoked: ")) << line;
    EXPECT_TRUE(contains(line, "rank 2 revoked the communicator")) << line;
  }
}

// `weft diag` on a running job: rank 2 sleeps instead of entering allreduce #21 (the operation
// timeout is a minute away); the report names it, and the JSON holds every rank's record.
TEST(FaultTolerance, DiagNamesTheRankThatHasNotEnteredTheCollective) {
  // The job's store authenticates: `weft run` and `weft diag` share the key file through
  // WEFT_AUTH_KEY_FILE (diag finds the job's namespace from the same key).
  const std::string key_path = ::testing::TempDir() + "weft-diag-test.key";
  ::unlink(key_path.c_str());
  {
    std::ofstream key(key_path);
    key << "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  }
  ::chmod(key_path.c_str(), 0600);
  ScopedEnv env({{"WEFT_TIMEOUT", "60s"}, {"WEFT_AUTH_KEY_FILE", key_path.c_str()}});
  ToolProcess job({"run", "-n", "3", "--grace", "1", "--timeout", "90", WEFT_CHILD_PATH, "2", "40",
                   "absent"});
  const std::string line = job.wait_for_line("rank 0: store ");
  ASSERT_FALSE(line.empty());
  const std::string addr = line.substr(line.find("store ") + 6);
  const std::string json_path = ::testing::TempDir() + "weft-diag-test.json";
  const std::string expected = "rank 2 has not entered allreduce #21 (f32 x 64, sum) (ranks 0,1 "
                               "waiting in it since";
  ToolResult diag;
  // The others reach allreduce #21 within moments; ask until they have.
  for (int attempt = 0; attempt < 20; ++attempt) {
    diag = run_tool({"diag", "--store", addr, "--wait", "5", "--json", json_path});
    if (contains(diag.out, expected)) break;
    std::this_thread::sleep_for(milliseconds(300));
  }
  EXPECT_EQ(diag.exit_code, 0) << diag.out << diag.err;
  EXPECT_TRUE(contains(diag.out, expected)) << diag.out << diag.err;
  EXPECT_LT(diag.elapsed, milliseconds(10000));
  std::ifstream in(json_path);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  ASSERT_EQ(doc["communicators"].size(), 1u) << doc.dump();
  const auto& comm = doc["communicators"][0];
  EXPECT_EQ(comm["size"], 3);
  ASSERT_EQ(comm["ranks"].size(), 3u);
  for (const auto& rank : comm["ranks"]) {
    ASSERT_TRUE(rank.is_object());
    EXPECT_FALSE(rank["entries"].empty());
  }
  EXPECT_TRUE(contains(comm["report"][0].get<std::string>(), "rank 2 has not entered")) << doc.dump();
  ::kill(job.pid(), SIGINT);
  job.finish();
  // Without a job, diag says so.
  ToolResult none = run_tool({"diag", "--store", addr, "--wait", "1"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_TRUE(contains(none.err, "cannot reach the store") || contains(none.err, "no running"))
      << none.err;
}

// The scenario end to end: 4 ranks train; rank 2 is SIGKILLed in a gradient allreduce;
// the survivors shrink to 3, redo the step and train on; `weft run --respawn 1` starts a
// replacement that joins through grow() 10 steps later, and training ends on 4 ranks with every
// replica identical. The demo checks every step that the average is over exactly size() ranks.
TEST(FaultTolerance, ElasticTrainingShrinksAfterAKillAndGrowsBack) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    ScopedEnv env({{"WEFT_TRANSPORT", transport}});
    auto r = run_tool({"run", "-n", "4", "--respawn", "1", "--timeout", "120", WEFT_ELASTIC_PATH,
                       "--steps", "60", "--kill-rank", "2", "--kill-step", "20"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_LT(r.elapsed, milliseconds(60000)) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "[2] rank 2: killing myself in the gradient allreduce of step 20"))
        << r.out;
    EXPECT_TRUE(contains(r.err, "rank 2 failed (killed by signal 9 (SIGKILL)); starting a "
                                "replacement"))
        << r.err;
    // Every survivor's allreduce failed naming the dead rank.
    for (int survivor : {0, 1, 3}) {
      bool named = false;
      for (const std::string& line : r.out_lines()) {
        // Step 20, or 21 if the victim's share of step 20 was out before it died.
        named = named || (line.rfind("[" + std::to_string(survivor) + "] step 2", 0) == 0 &&
                          contains(line, ": allreduce failed: peer lost") && contains(line, "rank 2"));
      }
      EXPECT_TRUE(named) << "rank " << survivor << "\n" << r.out;
    }
    EXPECT_TRUE(contains(r.out, "shrunk to 3 ranks; redoing step 2")) << r.out;
    EXPECT_TRUE(contains(r.out, "ranks 3")) << r.out;  // steps printed while on 3 ranks
    EXPECT_TRUE(contains(r.out, "joined as rank 3 of 4")) << r.out;
    EXPECT_TRUE(contains(r.out, "grew to 4 ranks after step 3")) << r.out;
    EXPECT_TRUE(contains(r.out, "done: 4 ranks")) << r.out;
    EXPECT_TRUE(contains(r.out, "shrinks 1, grows 1, parameters identical on every rank")) << r.out;
  }
}

}  // namespace
}  // namespace weft::test
