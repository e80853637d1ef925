// A rank that loses its network: two ranks on the two hosts of a namespace network
// (tests/netns: netns::Network::pair(), one veth link) run allreduces over TCP; the test takes
// the link down and both ranks must fail within about peer_timeout, naming the other rank as not
// responding. The store and the ranks are started by hand (WEFT_* variables), the store on
// host h0's address. Needs root (ip netns); skipped, saying why, where that is not allowed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "netns/network.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NetworkLoss, BothRanksDeclareTheOtherFailedWhenTheLinkGoesDown) {
  if (!netns::unavailable().empty()) GTEST_SKIP() << netns::unavailable();
  auto net = netns::Network::pair();
  ASSERT_TRUE(net.ok()) << net.error();
  // Per-process names, removed first: a stale log from an earlier run would give a stale port.
  const std::string dir = ::testing::TempDir() + "weft-netns-" + std::to_string(::getpid()) + "-";
  const std::string store_log = dir + "store.log";
  const std::string log0 = dir + "rank0.log", log1 = dir + "rank1.log";
  for (const std::string& f : {store_log, log0, log1}) std::remove(f.c_str());
  const std::string store_host = net.address("h0");
  netns::Process store = net.spawn(
      "h0", std::string(WEFT_TOOL_PATH) + " store --host " + store_host + " --port 0", store_log);
  const std::string listening = "listening on " + store_host + ":";
  std::string port;
  for (auto t0 = Clock::now(); port.empty() && Clock::now() - t0 < 10s;) {
    const std::string text = slurp(store_log);
    const size_t at = text.find(listening);
    if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
      const size_t from = at + listening.size();
      port = text.substr(from, text.find('\n', at) - from);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  ASSERT_FALSE(port.empty()) << slurp(store_log);
  auto rank_cmd = [&](int rank) {
    return "env WEFT_RANK=" + std::to_string(rank) + " WEFT_SIZE=2 WEFT_STORE_ADDR=" + store_host +
           ":" + port + " WEFT_HOST_ID=host" + std::to_string(rank) +
           " WEFT_IFACE=eth0 WEFT_PEER_TIMEOUT=1s WEFT_TIMEOUT=60s " + WEFT_CHILD_PATH +
           " -1 100000000";
  };
  netns::Process r0 = net.spawn("h0", rank_cmd(0), log0);
  netns::Process r1 = net.spawn("h1", rank_cmd(1), log1);
  // Let them connect and run allreduces for a moment (rank 0 prints the store line once joined).
  for (auto t0 = Clock::now(); slurp(log0).find("store") == std::string::npos && Clock::now() - t0 < 20s;) {
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(500ms);
  ASSERT_TRUE(slurp(log0).find("failed") == std::string::npos) << slurp(log0);
  const auto cut_at = Clock::now();
  ASSERT_TRUE(net.set_link("link", false));
  const bool ended0 = r0.wait_until(cut_at + 15s).has_value();
  const bool ended1 = r1.wait_until(cut_at + 15s).has_value();
  const auto took = Clock::now() - cut_at;
  r0.kill();
  r1.kill();
  store.kill();
  const std::string out0 = slurp(log0), out1 = slurp(log1);
  EXPECT_TRUE(ended0 && ended1) << out0 << out1;
  EXPECT_LT(took, 10s);
  EXPECT_NE(out0.find("peer lost"), std::string::npos) << out0;
  EXPECT_NE(out0.find("rank 1 is not responding"), std::string::npos) << out0;
  EXPECT_NE(out1.find("peer lost"), std::string::npos) << out1;
  EXPECT_NE(out1.find("rank 0 is not responding"), std::string::npos) << out1;
  for (const std::string& f : {store_log, log0, log1}) std::remove(f.c_str());
}

}  // namespace
}  // namespace weft::test
