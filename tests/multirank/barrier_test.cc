// barrier: no rank leaves round k before every rank has entered it, for every algorithm x
// transport x world size, with a different late rank in each round.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "multirank/harness.h"

namespace weft::harness {
namespace {

class BarrierSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(BarrierSweep, NobodyLeavesEarly) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::barrier, p.algorithm);
  constexpr int kRounds = 12;
  std::atomic<int> entered{0};
  Failures failures;
  g.run([&](int rank) {
    for (int round = 0; round < kRounds; ++round) {
      // One rank arrives late each round; a barrier that lets anyone through early shows here.
      if (round % p.n == rank) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      entered.fetch_add(1);
      CollectiveArgs a;
      a.kind = OpKind::barrier;
      const Status s = g.collective(rank, a, options);
      if (!s.ok()) return failures.add(fmt::format("rank {} round {}: {}", rank, round,
                                                   s.to_string()));
      const int seen = entered.load();
      if (seen < (round + 1) * p.n) {
        failures.add(fmt::format("rank {} left round {} after only {} of {} arrivals", rank,
                                 round, seen, (round + 1) * p.n));
      }
    }
  });
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Barrier, BarrierSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::dissemination,
                                                                 Algorithm::binomial,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct,
                                                                 Algorithm::automatic})),
                         sweep_name);

}  // namespace
}  // namespace weft::harness
