// Every collective over namespace networks, results checked: `weft bench all --check` as a job
// of `netns.sh run` (each rank in its host's namespace, rank 0 hosting the store, links secured
// with the key `weft run` makes unless WEFT_SECURITY says otherwise). `weft bench` exits 3 when
// an element is wrong and 1 when a collective fails, so a job that exits 0 passed.
#include <gtest/gtest.h>

#include <string>

#include "netns/network.h"

namespace weft::test::netns {
namespace {

const std::string kBenchAll = std::string(WEFT_TOOL_PATH) + " bench all -f 8 -n 2 -w 1 --check";

// Runs `program` as a job on `net` and returns its output, expecting exit 0 and `transport` in
// rank 0's header line.
void expect_job_passes(const Network& net, const std::string& env, const std::string& program,
                       const JobLayout& layout, const std::string& transport) {
  std::string out;
  const int rc = shell(env + net.run_command(WEFT_TOOL_PATH, program, layout), &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("# transport: " + transport), std::string::npos) << out;
}

// Ranks interleaved across the racks (0 and 2 in rack ra), so every ring crosses the uplink.
TEST(NetnsCollectives, EveryCollectiveOverTwoRacks) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::two_racks();
  ASSERT_TRUE(net.ok()) << net.error();
  expect_job_passes(net, "", kBenchAll + " -b 8 -e 256K", {{"h0", "h2", "h1", "h3"}, 1, 120},
                    "tcp");
}

// Two ranks per host (8 ranks): hierarchical collectives, shared memory inside a namespace and
// TCP between them (rank 0's header names the transport of the whole communicator, tcp).
TEST(NetnsCollectives, EveryCollectiveOverTwoRacksTwoRanksPerHost) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::two_racks();
  ASSERT_TRUE(net.ok()) << net.error();
  expect_job_passes(net, "", kBenchAll + " -b 8 -e 64K", {{}, 2, 120}, "tcp");
}

// One rank per zone (three: not a power of two), plaintext links.
TEST(NetnsCollectives, EveryCollectiveAcrossThreeZonesInClear) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::zones();
  ASSERT_TRUE(net.ok()) << net.error();
  expect_job_passes(net, "WEFT_SECURITY=off ", kBenchAll + " -b 8 -e 64K",
                    {{"h0", "h2", "h4"}, 1, 120}, "tcp");
}

}  // namespace
}  // namespace weft::test::netns
