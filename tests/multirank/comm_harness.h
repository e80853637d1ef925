// Runs N ranks of a test as threads of this process, each with its own weft::Communicator over
// a real transport (TCP on loopback or shared memory), meeting through one in-memory store.
// Suites parameterised by TransportKind run once per transport (CommunicatorOverEachTransport).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "weft/weft.h"

namespace weft::testing {

// The transport test_options() asks for; set by CommunicatorOverEachTransport for each run.
inline TransportKind& test_transport() {
  static TransportKind kind = TransportKind::automatic;
  return kind;
}

class CommunicatorOverEachTransport : public ::testing::TestWithParam<TransportKind> {
 protected:
  void SetUp() override { test_transport() = GetParam(); }
  void TearDown() override { test_transport() = TransportKind::automatic; }
};

inline std::string transport_param_name(const ::testing::TestParamInfo<TransportKind>& info) {
  return to_string(info.param);
}

inline Options test_options() {
  Options o;
  o.transport = test_transport();
  o.timeout = std::chrono::seconds(60);
  o.connect_timeout = std::chrono::seconds(60);
  o.host_id = "test-host";
  if (const char* l = std::getenv("WEFT_TEST_LOG_LEVEL")) o.log_level = l;
  return o;
}

// Calls fn(comm) on `n` rank threads; fails the test if a communicator cannot be created.
inline void run_comm_ranks(int n, const Options& base,
                           const std::function<void(Communicator&)>& fn) {
  auto store = make_memory_store();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Options o = base;
      o.rank = r;
      o.size = n;
      if (o.host_id.empty()) o.host_id = "host-" + std::to_string(r);
      auto comm = Communicator::create(o, store);
      ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status().to_string();
      fn(*comm.value());
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace weft::testing
