// base/socket.h's address text: host_port and its inverse split_host_port (IPv4, names, bracketed
// IPv6 literals), with the malformed forms a user may type refused.
#include "base/socket.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(SplitHostPort, AcceptsNamesIpv4AndBracketedIpv6) {
  const struct {
    const char* text;
    const char* host;
    uint16_t port;
  } good[] = {{"node1:29400", "node1", 29400},
              {"127.0.0.1:1", "127.0.0.1", 1},
              {"[::1]:65535", "::1", 65535},
              {"[fe80::1%eth0]:7000", "fe80::1%eth0", 7000}};
  for (const auto& g : good) {
    Result<HostPort> r = split_host_port(g.text);
    ASSERT_TRUE(r.ok()) << g.text << ": " << r.status().to_string();
    EXPECT_EQ(r->host, g.host);
    EXPECT_EQ(r->port, g.port);
    EXPECT_EQ(host_port(r->host, r->port), g.text);  // the inverse of host_port
  }
}

TEST(SplitHostPort, RefusesMalformedText) {
  for (const char* bad : {"", "node1", ":80", "node1:", "a:b:c", "::1:80", "[::1]", "[::1]:x",
                          "h:0", "h:70000", "h:80x", "h:-1", "[]:80"}) {
    Result<HostPort> r = split_host_port(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace weft
