// Where ranks that outnumber the CPUs move (spread_target): the highest rank on a CPU holding
// more than ceil(ranks/cpus) goes to the allowed CPU holding the fewest, if that holds fewer than
// floor(ranks/cpus); nobody moves while a rank's CPU is unknown or only one CPU is allowed.
#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "transport/shm/shm_transport.h"

namespace weft {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : list) CPU_SET(c, &set);
  return set;
}

// The target of every rank, in rank order.
std::vector<int> targets(const std::vector<int>& cpu_of_rank, const cpu_set_t& allowed) {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(cpu_of_rank.size()); ++r) {
    out.push_back(spread_target(r, cpu_of_rank, allowed));
  }
  return out;
}

TEST(SpreadTarget, ThreeOnOneCpuAndOneOnTheOtherMovesTheHighestOfTheThree) {
  EXPECT_EQ(targets({0, 0, 1, 0}, cpus({0, 1})), (std::vector<int>{-1, -1, -1, 1}));
  EXPECT_EQ(targets({1, 0, 1, 1}, cpus({0, 1})), (std::vector<int>{-1, -1, -1, 0}));
}

TEST(SpreadTarget, AllOnOneCpuMovesOneAtATime) {
  EXPECT_EQ(targets({0, 0, 0, 0}, cpus({0, 1})), (std::vector<int>{-1, -1, -1, 1}));
  // After that move: three and one, the next highest moves.
  EXPECT_EQ(targets({0, 0, 0, 1}, cpus({0, 1})), (std::vector<int>{-1, -1, 1, -1}));
}

TEST(SpreadTarget, AnEvenSpreadStays) {
  EXPECT_EQ(targets({0, 1, 0, 1}, cpus({0, 1})), (std::vector<int>(4, -1)));
  EXPECT_EQ(targets({0, 0, 1, 1}, cpus({0, 1})), (std::vector<int>(4, -1)));
  // Five ranks on two CPUs: three and two is as even as it gets.
  EXPECT_EQ(targets({0, 0, 0, 1, 1}, cpus({0, 1})), (std::vector<int>(5, -1)));
  // Eight on two: five and three is not.
  EXPECT_EQ(targets({0, 0, 0, 0, 0, 1, 1, 1}, cpus({0, 1})),
            (std::vector<int>{-1, -1, -1, -1, 1, -1, -1, -1}));
}

TEST(SpreadTarget, GoesToTheAllowedCpuHoldingTheFewest) {
  // Six ranks on CPUs 0-2: four on 0, two on 1, none on 2.
  EXPECT_EQ(spread_target(4, std::vector<int>{0, 0, 1, 1, 0, 0}, cpus({0, 1, 2})), -1);
  EXPECT_EQ(spread_target(5, std::vector<int>{0, 0, 1, 1, 0, 0}, cpus({0, 1, 2})), 2);
  // CPU 1 holds nobody but is not allowed: CPU 3 is.
  EXPECT_EQ(spread_target(3, std::vector<int>{0, 0, 3, 0}, cpus({0, 3})), 3);
  EXPECT_EQ(spread_target(3, std::vector<int>{0, 0, 2, 0}, cpus({0, 3})), 3);
}

TEST(SpreadTarget, StaysWhenItCannotTell) {
  // A rank that has not waited yet: its CPU is unknown.
  EXPECT_EQ(targets({0, 0, -1, 0}, cpus({0, 1})), (std::vector<int>(4, -1)));
  // One allowed CPU: nowhere to go.
  EXPECT_EQ(targets({0, 0, 0, 0}, cpus({0})), (std::vector<int>(4, -1)));
  // This rank's CPU is outside its mask (the mask changed): leave it to the kernel.
  EXPECT_EQ(spread_target(3, std::vector<int>{5, 5, 1, 5}, cpus({0, 1})), -1);
  // A rank index out of range, a CPU number out of range.
  EXPECT_EQ(spread_target(4, std::vector<int>{0, 0, 0, 0}, cpus({0, 1})), -1);
  EXPECT_EQ(spread_target(3, std::vector<int>{0, 0, CPU_SETSIZE, 0}, cpus({0, 1})), -1);
}

}  // namespace
}  // namespace weft
