// The networks of netns.sh are what they claim: every host reaches every address of every other
// host, a cut link separates the racks until it is restored, and nothing of a network is left
// once its object goes.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "netns/network.h"
#include "netns/probe.h"

namespace weft::test::netns {
namespace {

using namespace std::chrono_literals;

void expect_all_pairs_reach(const Network& net) {
  for (const Host& from : net.hosts()) {
    for (const Host& to : net.hosts()) {
      if (from.name == to.name) continue;
      for (const std::string& address : to.addresses) {
        EXPECT_TRUE(reaches(net, from.name, to.name, address, 5s))
            << from.name << " -> " << to.name << " at " << address;
      }
    }
  }
}

bool exists(const std::string& name) {
  std::string out;
  shell("ip netns list", &out);
  return out.find(name + ".") != std::string::npos;
}

// Whether `pid` runs (a zombie does not: its reaper may be slow, or absent in a container).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(") ");
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

class Topology : public ::testing::TestWithParam<const char*> {};

TEST_P(Topology, EveryHostReachesEveryOtherAndNothingIsLeftAfterwards) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  std::string name;
  {
    Network net{std::string(GetParam())};
    ASSERT_TRUE(net.ok()) << net.error();
    name = net.name();
    EXPECT_TRUE(exists(name));
    expect_all_pairs_reach(net);
    for (const Link& l : net.links()) {
      std::string qdisc;
      EXPECT_EQ(shell("tc -n " + l.ns_a + " qdisc show dev " + l.if_a, &qdisc), 0);
      EXPECT_NE(qdisc.find("tbf"), std::string::npos) << l.name << ": " << qdisc;
    }
  }
  EXPECT_FALSE(exists(name));
}

INSTANTIATE_TEST_SUITE_P(Netns, Topology,
                         ::testing::Values("pair", "two_racks", "rails", "zones"));

TEST(NetnsTopology, TwoRacksHaveTheirHostsAndLinks) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::two_racks();
  ASSERT_TRUE(net.ok()) << net.error();
  ASSERT_EQ(net.hosts().size(), 4u);
  EXPECT_EQ(net.host("h1").group, net.host("h0").group);
  EXPECT_NE(net.host("h2").group, net.host("h0").group);
  EXPECT_EQ(net.link("uplink").mbit, 200);
  EXPECT_EQ(net.link("h3").mbit, 1000);
  std::string out;
  EXPECT_EQ(net.exec("h2", "ip -4 -o addr show dev eth0", &out), 0);
  EXPECT_NE(out.find(net.address("h2") + "/"), std::string::npos) << out;
}

TEST(NetnsTopology, ACutUplinkSeparatesTheRacksUntilItIsRestored) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  auto net = Network::two_racks();
  ASSERT_TRUE(net.ok()) << net.error();
  ASSERT_TRUE(net.set_link("uplink", false));
  EXPECT_FALSE(reaches(net, "h0", "h2", net.address("h2"), 300ms));
  EXPECT_TRUE(reaches(net, "h0", "h1", net.address("h1"), 5s));  // inside the rack: still there
  ASSERT_TRUE(net.set_link("uplink", true));
  EXPECT_TRUE(reaches(net, "h0", "h2", net.address("h2"), 5s));
}

TEST(NetnsTopology, ProcessesInsideGoWithTheNetwork) {
  if (!unavailable().empty()) GTEST_SKIP() << unavailable();
  pid_t pid = 0;
  {
    auto net = Network::pair();
    ASSERT_TRUE(net.ok()) << net.error();
    std::string out;
    // A process left running in the namespace, detached from this test (as a crashed rank is).
    ASSERT_EQ(net.exec("h1", "setsid sleep 300 >/dev/null 2>&1 & echo $!", &out), 0);
    pid = std::stoi(out);
    EXPECT_TRUE(alive(pid));
  }
  bool gone = false;  // killed when the network was deleted
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = !alive(pid);
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace weft::test::netns
