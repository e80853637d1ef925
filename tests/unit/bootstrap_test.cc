// Launcher detection (a pure function of an environment map) and opening the launch store.
#include "rendezvous/bootstrap.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace weft {
namespace {

using std::chrono::milliseconds;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

LaunchInfo detect_ok(const EnvMap& env) {
  Result<LaunchInfo> r = detect_launch(env);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : LaunchInfo{};
}

// The message of the error detect_launch must return (invalid_argument).
std::string detect_error(const EnvMap& env) {
  Result<LaunchInfo> r = detect_launch(env);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  return r.status().message();
}

const EnvMap kWeftRun = {{"WEFT_RANK", "2"},
                         {"WEFT_SIZE", "4"},
                         {"WEFT_LOCAL_RANK", "0"},
                         {"WEFT_LOCAL_SIZE", "2"},
                         {"WEFT_STORE_ADDR", "node1:29400"}};

const EnvMap kTorchrun = {{"RANK", "3"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.0.0.1"},
                          {"MASTER_PORT", "29500"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};

const EnvMap kOpenMpi = {{"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "6"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                         {"MASTER_ADDR", "head"},
                         {"MASTER_PORT", "1234"}};

const EnvMap kSlurm = {{"SLURM_PROCID", "5"},
                       {"SLURM_NTASKS", "8"},
                       {"SLURM_LOCALID", "1"},
                       {"SLURM_TASKS_PER_NODE", "4(x2)"},
                       {"WEFT_STORE_ADDR", "[fe80::1]:7000"}};

EnvMap with(EnvMap env, const EnvMap& changes) {
  for (const auto& [k, v] : changes) env[k] = v;
  return env;
}

EnvMap without(EnvMap env, const std::string& key) {
  env.erase(key);
  return env;
}

TEST(BootstrapTest, WeftRunGivesEverythingAndHostsNothing) {
  LaunchInfo i = detect_ok(with(kWeftRun, {{"WEFT_HOST_ID", "rack3-node1"}}));
  EXPECT_EQ(i.rule, "weft run");
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.size, 4);
  EXPECT_EQ(i.local_rank, 0);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.store_host, "node1");
  EXPECT_EQ(i.store_port, 29400);
  EXPECT_FALSE(i.host_store);  // the launcher serves the store
  EXPECT_EQ(i.host_id, "rack3-node1");
  EXPECT_FALSE(detect_ok(with(kWeftRun, {{"WEFT_RANK", "0"}})).host_store);
}

TEST(BootstrapTest, WeftVariablesByHandNeedRankSizeAndAddress) {
  LaunchInfo i = detect_ok({{"WEFT_RANK", "0"}, {"WEFT_SIZE", "1"}, {"WEFT_STORE_ADDR", "h:1"}});
  EXPECT_EQ(i.rule, "WEFT_* variables");
  EXPECT_EQ(i.local_rank, -1);
  EXPECT_FALSE(i.host_store);
  // Rank 0 may be told to host it.
  EXPECT_TRUE(detect_ok({{"WEFT_RANK", "0"},
                         {"WEFT_SIZE", "2"},
                         {"WEFT_STORE_ADDR", "h:1"},
                         {"WEFT_HOST_STORE", "1"}})
                  .host_store);
  std::string e = detect_error({{"WEFT_RANK", "0"}, {"WEFT_SIZE", "2"}});
  EXPECT_TRUE(Contains(e, "WEFT_STORE_ADDR not set"));
}

TEST(BootstrapTest, TorchrunWithAgentUsesMasterPortPlusOneHostedByRankZero) {
  LaunchInfo i = detect_ok(kTorchrun);
  EXPECT_EQ(i.rule, "torchrun (agent store; weft store on MASTER_PORT+1 hosted by rank 0)");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.store_host, "10.0.0.1");
  EXPECT_EQ(i.store_port, 29501);
  EXPECT_FALSE(i.host_store);
  EXPECT_TRUE(detect_ok(with(kTorchrun, {{"RANK", "0"}, {"LOCAL_RANK", "0"}})).host_store);
  EXPECT_TRUE(Contains(detect_error(with(kTorchrun, {{"MASTER_PORT", "65535"}})), "MASTER_PORT+1"));
}

TEST(BootstrapTest, TorchrunVariablesWithoutAgentUseMasterPortItself) {
  LaunchInfo i = detect_ok(without(with(kTorchrun, {{"RANK", "0"}, {"LOCAL_RANK", "0"}}),
                                   "TORCHELASTIC_USE_AGENT_STORE"));
  EXPECT_EQ(i.store_port, 29500);
  EXPECT_TRUE(i.host_store);
  EXPECT_TRUE(Contains(i.rule, "without agent"));
  LaunchInfo f = detect_ok(with(kTorchrun, {{"TORCHELASTIC_USE_AGENT_STORE", "False"}}));
  EXPECT_EQ(f.store_port, 29500);
}

TEST(BootstrapTest, TorchrunErrorsNameTheVariable) {
  EXPECT_EQ(detect_error(with(kTorchrun, {{"RANK", "5"}, {"WORLD_SIZE", "4"}})),
            "RANK=5 but WORLD_SIZE=4 (ranks are 0..3)");
  EXPECT_EQ(detect_error(with(kTorchrun, {{"RANK", "abc"}})), "RANK='abc' is not an integer");
  EXPECT_TRUE(Contains(detect_error(without(kTorchrun, "MASTER_ADDR")), "MASTER_ADDR is not set"));
  EXPECT_TRUE(Contains(detect_error(without(kTorchrun, "WORLD_SIZE")), "WORLD_SIZE is not set"));
  EXPECT_TRUE(Contains(detect_error(with(kTorchrun, {{"MASTER_PORT", "http"}})),
                       "MASTER_PORT='http' is not an integer"));
  EXPECT_TRUE(Contains(detect_error(with(kTorchrun, {{"MASTER_PORT", "0"}})), "not a TCP port"));
  EXPECT_TRUE(Contains(detect_error(with(kTorchrun, {{"WORLD_SIZE", "0"}})),
                       "WORLD_SIZE=0 must be at least 1"));
  EXPECT_EQ(detect_error(with(kTorchrun, {{"LOCAL_RANK", "2"}})),
            "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2");
  EXPECT_TRUE(Contains(detect_error(with(kTorchrun, {{"RANK", "99999999999"}})), "out of range"));
}

TEST(BootstrapTest, OpenMpiHostsOnRankZeroAtMasterOrWeftAddress) {
  LaunchInfo i = detect_ok(kOpenMpi);
  EXPECT_TRUE(Contains(i.rule, "Open MPI"));
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.size, 6);
  EXPECT_EQ(i.local_size, 3);
  EXPECT_EQ(i.store_host, "head");
  EXPECT_EQ(i.store_port, 1234);
  EXPECT_TRUE(i.host_store);
  LaunchInfo w =
      detect_ok(with(kOpenMpi, {{"WEFT_STORE_ADDR", "other:99"}, {"OMPI_COMM_WORLD_RANK", "4"}}));
  EXPECT_EQ(w.store_host, "other");
  EXPECT_EQ(w.store_port, 99);
  EXPECT_FALSE(w.host_store);
  EXPECT_TRUE(Contains(w.rule, "WEFT_STORE_ADDR"));
  std::string e = detect_error(without(without(kOpenMpi, "MASTER_ADDR"), "MASTER_PORT"));
  EXPECT_TRUE(Contains(e, "Open MPI: no store address"));
  EXPECT_TRUE(Contains(e, "WEFT_STORE_ADDR"));
  EXPECT_TRUE(Contains(detect_error(without(kOpenMpi, "OMPI_COMM_WORLD_SIZE")),
                       "OMPI_COMM_WORLD_SIZE is not set"));
}

TEST(BootstrapTest, SlurmReadsTasksPerNodeAndIpv6Addresses) {
  LaunchInfo i = detect_ok(kSlurm);
  EXPECT_TRUE(Contains(i.rule, "Slurm"));
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 4);
  EXPECT_EQ(i.store_host, "fe80::1");
  EXPECT_EQ(i.store_port, 7000);
  EXPECT_FALSE(i.host_store);
  EXPECT_EQ(
      detect_ok(with(kSlurm, {{"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_LOCALID", "0"}})).local_size,
      2);
  EXPECT_EQ(detect_ok(without(kSlurm, "SLURM_TASKS_PER_NODE")).local_size, -1);
  EXPECT_TRUE(Contains(detect_error(with(kSlurm, {{"SLURM_TASKS_PER_NODE", "(x2)"}})),
                       "SLURM_TASKS_PER_NODE='(x2)' does not start with a number"));
  LaunchInfo m = detect_ok(with(without(kSlurm, "WEFT_STORE_ADDR"), {{"MASTER_ADDR", "n0"},
                                                                     {"MASTER_PORT", "5"},
                                                                     {"SLURM_PROCID", "0"},
                                                                     {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(m.store_host, "n0");
  EXPECT_TRUE(m.host_store);
}

TEST(BootstrapTest, WeftVariablesOverrideLauncherFields) {
  LaunchInfo i = detect_ok(
      with(kSlurm, {{"WEFT_RANK", "0"}, {"WEFT_LOCAL_SIZE", "8"}, {"WEFT_HOST_ID", "h"}}));
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.local_size, 8);
  EXPECT_TRUE(i.host_store);  // rank 0 after the override
  EXPECT_TRUE(Contains(i.rule, "overridden by WEFT_RANK, WEFT_LOCAL_SIZE"));
  EXPECT_EQ(i.host_id, "h");
  // Messages name the variable the value came from.
  EXPECT_EQ(detect_error(with(kTorchrun, {{"WEFT_RANK", "9"}})),
            "WEFT_RANK=9 but WORLD_SIZE=8 (ranks are 0..7)");
  EXPECT_EQ(detect_error(with(kWeftRun, {{"WEFT_RANK", "abc"}})),
            "WEFT_RANK='abc' is not an integer");
  EXPECT_FALSE(detect_ok(with(kOpenMpi, {{"WEFT_HOST_STORE", "0"}})).host_store);
  EXPECT_TRUE(Contains(detect_error(with(kOpenMpi, {{"WEFT_HOST_STORE", "maybe"}})),
                       "WEFT_HOST_STORE='maybe' is not a boolean"));
}

TEST(BootstrapTest, WeftRunWinsOverAnEnclosingSlurmAllocation) {
  // `weft run` inside an sbatch script inherits SLURM_PROCID=0; the launcher's variables win.
  LaunchInfo i = detect_ok(with(kWeftRun, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(i.rule, "weft run");
  EXPECT_EQ(i.size, 4);
}

TEST(BootstrapTest, BadStoreAddressesAndEmptyEnvironments) {
  for (const char* addr : {"node1", ":80", "node1:", "a:b:c", "[::1]", "[::1]:x", "h:70000"}) {
    std::string e = detect_error(with(kWeftRun, {{"WEFT_STORE_ADDR", addr}}));
    EXPECT_TRUE(Contains(e, std::string("WEFT_STORE_ADDR='") + addr + "'")) << e;
  }
  EXPECT_EQ(detect_ok(with(kWeftRun, {{"WEFT_STORE_ADDR", "[::1]:80"}})).store_host, "::1");
  EXPECT_EQ(detect_error({}),
            "no launcher environment found: set WEFT_RANK/WEFT_SIZE/WEFT_STORE_ADDR or run under "
            "weft run, torchrun, mpirun or srun");
  EXPECT_TRUE(Contains(detect_error({{"HOME", "/root"}, {"WEFT_RANK", ""}}),
                       "no launcher environment found"));  // empty counts as unset
}

TEST(BootstrapTest, CurrentEnvironmentReadsEnviron) {
  ::setenv("WEFT_BOOTSTRAP_TEST_VAR", "a=b", 1);
  EnvMap env = current_environment();
  ::unsetenv("WEFT_BOOTSTRAP_TEST_VAR");
  EXPECT_EQ(env["WEFT_BOOTSTRAP_TEST_VAR"], "a=b");
}

TEST(BootstrapTest, RankZeroHostsTheStoreAndOthersConnect) {
  // Rank 0 picks a port by starting on 0 first is not possible through LaunchInfo (port 0 is not
  // an address), so find a free port, then let rank 0 host on it.
  uint16_t port = 0;
  {
    auto probe = TcpStoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = probe.value()->port();
  }
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  LaunchInfo r0 = detect_ok(
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"WEFT_STORE_ADDR", addr}});
  LaunchInfo r1 = detect_ok(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"WEFT_STORE_ADDR", addr}});
  ASSERT_TRUE(r0.host_store);
  ASSERT_FALSE(r1.host_store);
  Result<std::shared_ptr<Store>> s1 = Status(ErrorCode::internal, "not run");
  std::thread rank1([&] { s1 = open_launch_store(r1, milliseconds(30000), nullptr); });
  std::unique_ptr<TcpStoreServer> server;
  Result<std::shared_ptr<Store>> s0 = open_launch_store(r0, milliseconds(30000), &server);
  rank1.join();
  ASSERT_TRUE(s0.ok()) << s0.status().to_string();
  ASSERT_TRUE(s1.ok()) << s1.status().to_string();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(s1.value()->set("from1", "hello").ok());
  EXPECT_EQ(s0.value()->get_string("from1", milliseconds(30000)).value(), "hello");

  // A second host on the same port fails with a message naming the rank and the port.
  std::unique_ptr<TcpStoreServer> second;
  Result<std::shared_ptr<Store>> clash = open_launch_store(r0, milliseconds(1000), &second);
  ASSERT_FALSE(clash.ok());
  EXPECT_TRUE(Contains(clash.status().message(),
                       "rank 0: cannot host the weft store on port " + std::to_string(port)));
  EXPECT_EQ(open_launch_store(r0, milliseconds(10), nullptr).status().code(),
            ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace weft
