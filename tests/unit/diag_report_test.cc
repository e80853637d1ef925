// The "who is stuck where" report of `weft diag` from synthetic flight records.
#include <gtest/gtest.h>

#include "core/diag_report.h"

namespace weft {
namespace {

using nlohmann::json;

json collective(uint64_t seq, const char* state, double started_s = -1.0) {
  json e = {{"op", "allreduce"},
            {"describe", "allreduce #" + std::to_string(seq) + " (f32 x 4, sum)"},
            {"seq", seq},
            {"state", state},
            {"queued_s", started_s},
            {"started_s", started_s}};
  return e;
}

json record(std::vector<json> entries) { return json{{"entries", entries}}; }

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(DiagReport, RanksRangesReadLikeHumansWriteThem) {
  EXPECT_EQ(rank_ranges({0, 1, 2, 4, 6, 7}), "0-2,4,6,7");
  EXPECT_EQ(rank_ranges({0, 1}), "0,1");
  EXPECT_EQ(ranks_phrase({3}), "rank 3");
  EXPECT_EQ(ranks_phrase({0, 1, 2, 5}), "ranks 0-2,5");
}

TEST(DiagReport, NamesTheRankThatHasNotEnteredTheBlockingCollective) {
  std::vector<std::optional<json>> recs;
  for (int r = 0; r < 8; ++r) {
    if (r == 3) {
      recs.push_back(record({collective(811, "done")}));
    } else {
      recs.push_back(record({collective(811, "done"), collective(812, "running", -31.2)}));
    }
  }
  const auto lines = stuck_report(recs);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0],
            "rank 3 has not entered allreduce #812 (f32 x 4, sum) (ranks 0-2,4-7 waiting in it "
            "since 31.2 s)");
}

TEST(DiagReport, SilentRanksCountAsNotEnteredAndAreListed) {
  std::vector<std::optional<json>> recs = {record({collective(5, "running", -2.0)}), std::nullopt,
                                           record({collective(5, "running", -1.0)})};
  const auto lines = stuck_report(recs);
  const std::string all = joined(lines);
  EXPECT_NE(all.find("rank 1 has not entered allreduce #5 (f32 x 4, sum) (ranks 0,2 waiting in it "
                     "since 2.0 s)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("rank 1 did not answer"), std::string::npos) << all;
}

TEST(DiagReport, RanksStuckInAnotherCollectiveAndPointToPointAndFailures) {
  json recv = {{"op", "recv"},
               {"describe", "recv of 8 bytes from rank 0 (tag 7)"},
               {"state", "running"},
               {"queued_s", -4.0},
               {"started_s", -4.0}};
  json failed = collective(9, "failed");
  failed["error"] = "peer lost: rank 2 is not responding";
  std::vector<std::optional<json>> recs = {
      record({collective(9, "running", -3.0)}),
      record({collective(9, "done"), collective(10, "running", -1.0)}),  // ahead: a bug or skew
      record({recv}), record({failed})};
  const std::string all = joined(stuck_report(recs));
  EXPECT_NE(all.find("rank 2 has not entered allreduce #9"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 1 is stuck in allreduce #10"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 2 waits in recv of 8 bytes from rank 0 (tag 7) (running for 4.0 s)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("rank 3 failed: allreduce #9 (f32 x 4, sum): peer lost"), std::string::npos)
      << all;
}

TEST(DiagReport, EveryRankInTheSameCollectiveOrNothingInFlight) {
  std::vector<std::optional<json>> busy = {record({collective(2, "running", -0.5)}),
                                           record({collective(2, "queued", -0.25)})};
  EXPECT_EQ(stuck_report(busy)[0],
            "every rank is in allreduce #2 (f32 x 4, sum) (ranks 0,1 waiting in it since 0.5 s)");
  std::vector<std::optional<json>> idle = {record({collective(7, "done")}),
                                           record({collective(7, "done")})};
  EXPECT_EQ(stuck_report(idle)[0], "no collective in flight; every answering rank finished #7");
  std::vector<std::optional<json>> fresh = {record({}), record({})};
  EXPECT_EQ(stuck_report(fresh)[0], "no collective has run yet");
  // Hostile or partial records never crash the report.
  std::vector<std::optional<json>> odd = {json{{"entries", 5}}, json::array(),
                                          record({json{{"seq", "x"}}, json(3)})};
  EXPECT_FALSE(stuck_report(odd).empty());
}

}  // namespace
}  // namespace weft
