// The tbf caps hold: a transfer over a capped link is never faster than its cap (with a margin
// for the token bucket's burst). Only upper bounds: a slow or busy machine moves less, never
// more, so these cannot fail from load.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>

#include "netns/network.h"
#include "netns/probe.h"

namespace weft::test::netns {
namespace {

constexpr size_t kMiB = 1 << 20;

// Goodput from `from` to `to` must stay under 1.2 x `cap_mbit` (the burst, 2 ms at the rate,
// is a few percent of these transfers; TCP/IP headers count against the cap, so a link that
// holds its cap shows about 95% of it).
void expect_capped(const Network& net, const std::string& from, const std::string& to,
                   int cap_mbit, size_t bytes) {
  const std::optional<double> mbit = goodput_mbit(net, from, to, bytes);
  ASSERT_TRUE(mbit.has_value()) << from << " -> " << to;
  std::printf("%s -> %s: %.0f Mbit/s (cap %d)\n", from.c_str(), to.c_str(), *mbit, cap_mbit);
  ::testing::Test::RecordProperty(from + "_to_" + to + "_mbit", static_cast<int>(*mbit));
  EXPECT_LT(*mbit, 1.2 * cap_mbit) << from << " -> " << to;
}

TEST(NetnsRate, TheUplinkBetweenRacksHoldsItsCapAndANewOne) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::two_racks();
  ASSERT_TRUE(net.ok()) << net.error();
  expect_capped(net, "h0", "h2", 200, 8 * kMiB);  // about 0.35 s at the cap
  expect_capped(net, "h3", "h1", 200, 8 * kMiB);  // the other direction
  expect_capped(net, "h0", "h1", 1000, 16 * kMiB);  // inside a rack: the host links' cap
  ASSERT_TRUE(net.set_rate("uplink", 50));
  EXPECT_EQ(net.link("uplink").mbit, 200);  // the description is from when it was built
  expect_capped(net, "h2", "h0", 50, 2 * kMiB);
}

TEST(NetnsRate, TheSlowZoneLinkHoldsItsCap) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::zones();
  ASSERT_TRUE(net.ok()) << net.error();
  expect_capped(net, "h0", "h4", 100, 4 * kMiB);
  expect_capped(net, "h0", "h2", 1000, 16 * kMiB);
}

TEST(NetnsRate, EachRailHoldsItsCap) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::rails();
  ASSERT_TRUE(net.ok()) << net.error();
  expect_capped(net, "h0", "h1", 500, 8 * kMiB);  // over rail0, h1's first address
}

}  // namespace
}  // namespace weft::test::netns
