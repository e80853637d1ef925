// The pure parts of the launcher: rank placement and line relaying.
#include <gtest/gtest.h>
#include <unistd.h>

#include <signal.h>

#include "tools/launcher/job_report.h"
#include "tools/launcher/line_relay.h"
#include "tools/launcher/rank_layout.h"

namespace weft::launcher {
namespace {

TEST(RankLayoutTest, OneHostByDefault) {
  auto p = place_ranks(3, "", "");
  ASSERT_TRUE(p.ok());
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(p.value()[r].rank, r);
    EXPECT_EQ(p.value()[r].size, 3);
    EXPECT_EQ(p.value()[r].local_rank, r);
    EXPECT_EQ(p.value()[r].local_size, 3);
    EXPECT_EQ(p.value()[r].host_id, "");
  }
  auto env = rank_environment(p.value()[1], "127.0.0.1:5");
  EXPECT_EQ(env, (std::vector<std::string>{"WEFT_RANK=1", "WEFT_SIZE=3", "WEFT_LOCAL_RANK=1",
                                           "WEFT_LOCAL_SIZE=3", "WEFT_STORE_ADDR=127.0.0.1:5"}));
}

TEST(RankLayoutTest, UnevenHosts) {
  auto p = place_ranks(5, "", "x,y,x,x,y");
  ASSERT_TRUE(p.ok());
  std::vector<std::pair<int, int>> local;
  for (const auto& r : p.value()) local.emplace_back(r.local_rank, r.local_size);
  EXPECT_EQ(local, (std::vector<std::pair<int, int>>{{0, 3}, {0, 2}, {1, 3}, {2, 3}, {1, 2}}));
  auto env = rank_environment(p.value()[4], "h:1");
  EXPECT_EQ(env.back(), "WEFT_HOST_ID=y");
}

TEST(RankLayoutTest, TorchVariablesForEnvInit) {
  auto p = place_ranks(4, "", "a,a,b,b");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(torch_environment(p.value()[3], 29500, false),
            (std::vector<std::string>{"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1",
                                      "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                                      "MASTER_PORT=29500"}));
  EXPECT_EQ(torch_environment(p.value()[0], 0, true).size(), 4u);  // the user's master kept
}

TEST(RankLayoutTest, RejectsBadInput) {
  EXPECT_FALSE(place_ranks(0, "", "").ok());
  EXPECT_FALSE(place_ranks(2, "a", "a,b").ok());
  EXPECT_FALSE(place_ranks(2, "", "a").ok());
  EXPECT_FALSE(place_ranks(2, "", "a,").ok());
}

std::string relay_through_pipe(int rank, const std::vector<std::string>& chunks) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  {
    LineRelay relay(rank, fds[1]);
    for (const auto& c : chunks) relay.feed(c);
    relay.finish();
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fds[0]);
  return out;
}

TEST(LineRelayTest, JoinsPartialLinesAndPrefixesEach) {
  EXPECT_EQ(relay_through_pipe(7, {"he", "llo\nwor", "ld\n\nend"}),
            "[7] hello\n[7] world\n[7] \n[7] end\n");
  EXPECT_EQ(relay_through_pipe(0, {}), "");
  EXPECT_EQ(relay_through_pipe(12, {"a\n"}), "[12] a\n");
}

}  // namespace
}  // namespace weft::launcher

namespace weft::launcher {
namespace {

TEST(JobReportTest, ARankThatDiedOfASignalTheLauncherDidNotSendEndedOnItsOwn) {
  JobEnd end;
  end.cause = EndCause::rank_failed;
  end.detail = 0;
  std::vector<RankOutcome> outcomes(3);
  for (auto& o : outcomes) o.started = true;
  outcomes[0].exit = ExitInfo{false, 7, 0, false};
  // Rank 1 was SIGKILLed by someone else while the launcher sent SIGTERM.
  outcomes[1].stopped_by_launcher = true;
  outcomes[1].signals_sent = uint64_t{1} << SIGTERM;
  outcomes[1].exit = ExitInfo{true, 0, SIGKILL, false};
  // Rank 2 died of the launcher's SIGTERM.
  outcomes[2].stopped_by_launcher = true;
  outcomes[2].signals_sent = uint64_t{1} << SIGTERM;
  outcomes[2].exit = ExitInfo{true, 0, SIGTERM, false};
  const std::string s = format_summary(outcomes, end);
  EXPECT_NE(s.find("rank 0: exit 7\n"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 1: killed by signal 9 (SIGKILL)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 2: terminated by launcher after rank 0 failed: killed by signal 15"),
            std::string::npos)
      << s;
}

// `weft run --ps`: a shard that fails ends the job under its own name.
TEST(JobReportTest, AFailedPsShardIsNamed) {
  JobEnd end;
  end.cause = EndCause::ps_shard_failed;
  end.detail = 1;
  EXPECT_EQ(describe_end(end, 2, 2, "exit 3"), "ps shard 1 failed (exit 3); terminating all 2 ranks");
  std::vector<RankOutcome> outcomes(1);
  outcomes[0].started = true;
  outcomes[0].stopped_by_launcher = true;
  outcomes[0].signals_sent = uint64_t{1} << SIGTERM;
  outcomes[0].exit = ExitInfo{true, 0, SIGTERM, false};
  EXPECT_NE(format_summary(outcomes, end).find("terminated by launcher after ps shard 1 failed"),
            std::string::npos);
}

}  // namespace
}  // namespace weft::launcher
