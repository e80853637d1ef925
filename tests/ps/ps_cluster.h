// PsCluster: shards of the parameter server in this process (127.0.0.1, port 0) and clients for
// them, for tests that run workers as threads.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ps/server.h"
#include "weft/ps.h"

namespace weft::ps::test {

inline constexpr const char* kToken = "job/test-token";

struct PsCluster {
  explicit PsCluster(int shards, const std::string& token = kToken) {
    for (int i = 0; i < shards; ++i) {
      ServerOptions o;
      o.shard = i;
      o.num_shards = shards;
      o.job_token = token;
      auto s = ShardServer::start(o);
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      if (!s.ok()) return;
      addresses.push_back(s.value()->address());
      servers.push_back(std::move(s.value()));
    }
  }

  std::unique_ptr<Client> client(uint32_t worker, const std::string& token = kToken,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    ClientOptions o;
    o.worker = worker;
    o.job_token = token;
    o.timeout = timeout;
    auto c = Client::connect(addresses, o);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c.value()) : nullptr;
  }

  std::vector<std::unique_ptr<ShardServer>> servers;
  std::vector<std::string> addresses;
};

}  // namespace weft::ps::test
