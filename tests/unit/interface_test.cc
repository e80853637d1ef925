// Which address a rank publishes for remote peers (WEFT_IFACE): by name, by IPv4 CIDR, or by
// default the first interface that is up, not loopback and not a container or virtual bridge;
// 127.0.0.1 only when nothing else exists. A peer on another machine that published loopback is
// refused with an error naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp/mesh.h"
#include "transport/tcp/socket.h"
#include "weft/store.h"

namespace weft::tcp {
namespace {

using namespace std::chrono_literals;

const std::vector<InterfaceAddress> kMachine = {
    {"lo", "127.0.0.1", true, true},
    {"docker0", "172.17.0.1", true, false},
    {"br-5e1f", "172.18.0.1", true, false},
    {"veth12ab", "169.254.3.4", true, false},
    {"virbr0", "192.168.122.1", true, false},
    {"eth0", "10.1.2.3", false, false},  // down
    {"eth1", "10.2.0.7", true, false},
    {"ib0", "192.168.50.9", true, false},
};

TEST(Interface, DefaultSkipsLoopbackBridgesAndDownInterfaces) {
  auto ip = choose_interface_address("", kMachine);
  ASSERT_TRUE(ip.ok()) << ip.status().to_string();
  EXPECT_EQ(ip.value(), "10.2.0.7");
}

TEST(Interface, DefaultFallsBackToLoopbackWhenNothingElseIsThere) {
  const std::vector<InterfaceAddress> only = {{"lo", "127.0.0.1", true, true},
                                              {"docker0", "172.17.0.1", true, false}};
  auto ip = choose_interface_address("", only);
  ASSERT_TRUE(ip.ok());
  EXPECT_EQ(ip.value(), "127.0.0.1");
}

TEST(Interface, ByNameTakesEvenABridge) {
  auto ip = choose_interface_address("docker0", kMachine);
  ASSERT_TRUE(ip.ok());
  EXPECT_EQ(ip.value(), "172.17.0.1");
  auto ib = choose_interface_address("ib0", kMachine);
  ASSERT_TRUE(ib.ok());
  EXPECT_EQ(ib.value(), "192.168.50.9");
}

TEST(Interface, ByCidr) {
  struct Case {
    const char* spec;
    const char* want;
  };
  for (const Case& c : {Case{"192.168.50.0/24", "192.168.50.9"}, Case{"10.2.0.0/16", "10.2.0.7"},
                        Case{"10.0.0.0/8", "10.2.0.7"},  // eth0 is down
                        Case{"172.16.0.0/12", "172.17.0.1"}, Case{"10.2.0.7/32", "10.2.0.7"},
                        Case{"0.0.0.0/0", "127.0.0.1"}}) {
    auto ip = choose_interface_address(c.spec, kMachine);
    ASSERT_TRUE(ip.ok()) << c.spec << ": " << ip.status().to_string();
    EXPECT_EQ(ip.value(), c.want) << c.spec;
  }
}

TEST(Interface, NoMatchAndMalformedSpecsAreErrors) {
  auto none = choose_interface_address("eth9", kMachine);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(none.status().message().find("no IPv4 interface matches 'eth9'"), std::string::npos);
  EXPECT_NE(none.status().message().find("eth1=10.2.0.7"), std::string::npos)
      << none.status().message();
  EXPECT_FALSE(choose_interface_address("10.9.0.0/16", kMachine).ok());
  for (const char* bad : {"10.0.0.0/33", "10.0.0.0/-1", "10.0.0/8", "10.0.0.0/", "10.0.0.0/8x",
                          "x/8"}) {
    auto r = choose_interface_address(bad, kMachine);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("not a valid IPv4 CIDR"), std::string::npos) << bad;
  }
}

TEST(Interface, LoopbackIsAllOf127Slash8) {
  EXPECT_TRUE(is_loopback_ip("127.0.0.1"));
  EXPECT_TRUE(is_loopback_ip("127.255.3.1"));
  EXPECT_FALSE(is_loopback_ip("128.0.0.1"));
  EXPECT_FALSE(is_loopback_ip("10.0.0.1"));
  EXPECT_FALSE(is_loopback_ip("not an address"));
}

TEST(Interface, ThisMachineHasAnAddressToPublish) {
  auto ip = select_interface_address("");
  ASSERT_TRUE(ip.ok()) << ip.status().to_string();
  EXPECT_FALSE(ip.value().empty());
  auto lo = select_interface_address("127.0.0.0/8");
  ASSERT_TRUE(lo.ok()) << lo.status().to_string();
  EXPECT_TRUE(is_loopback_ip(lo.value()));
}

// Rank 1 pretends to be on another machine and publishes loopback (as a rank with no usable
// interface does): rank 0 must refuse it by name instead of connecting to itself or timing out.
TEST(Interface, RemotePeerThatPublishedLoopbackIsAnErrorNamingIt) {
  auto store = make_memory_store();
  ASSERT_TRUE(store->set("tcp/addr/1", std::string_view("elsewhere\n127.0.0.1\n1\nother-machine")).ok());
  MeshConfig c;
  c.rank = 0;
  c.size = 2;
  c.host_id = "here";
  c.deadline = std::chrono::steady_clock::now() + 20s;
  const auto started = std::chrono::steady_clock::now();
  auto mesh = connect_mesh(*store, c);
  ASSERT_FALSE(mesh.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  const std::string& m = mesh.status().message();
  EXPECT_NE(m.find("rank 0: rank 1 is on another host (other-machine) but published the loopback "
                   "address 127.0.0.1"), std::string::npos) << m;
  EXPECT_NE(m.find("WEFT_IFACE"), std::string::npos) << m;
}

}  // namespace
}  // namespace weft::tcp
