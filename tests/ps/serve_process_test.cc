// `weft ps serve` as a real process: it finds the job's store through the launcher variables
// (WEFT_STORE_ADDR, WEFT_JOB_ID), publishes its address, and a client finds it there; another
// job's client is refused; once the shard is killed, the client's error names it in time.
#include <gtest/gtest.h>

#include <csignal>

#include "process/tool_process.h"
#include "weft/ps.h"
#include "weft/store.h"

namespace weft::ps {
namespace {

TEST(PsServeProcess, ClientFindsTheShardThroughTheStore) {
  auto store_server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(store_server.ok()) << store_server.status().to_string();
  const std::string addr = "127.0.0.1:" + std::to_string(store_server.value()->port());
  weft::test::ScopedEnv env({{"WEFT_STORE_ADDR", addr.c_str()}, {"WEFT_JOB_ID", "ps-process-test"}});
  weft::test::ToolProcess shard({"ps", "serve", "--shard", "0", "--of", "1"});
  const std::string line = shard.wait_for_line("serving on");
  ASSERT_FALSE(line.empty()) << shard.finish().err;

  ClientOptions options;
  options.timeout = std::chrono::seconds(10);
  auto client = Client::from_env(options);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_EQ(client.value()->num_shards(), 1);
  TensorSpec spec;
  spec.name = "w";
  spec.shape = {4};
  spec.optimizer.lr = 1.0f;
  const std::vector<float> w = {1, 2, 3, 4}, g = {1, 1, 1, 1};
  ASSERT_TRUE(client.value()->init(spec, w.data()).ok());
  std::vector<float> out(4);
  auto v = client.value()->push_pull("w", g.data(), out.data(), 4, DataType::fp32, 0);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 3}));

  // The shard checks the job token (the job's namespace): a client of another job is refused.
  ClientOptions stranger_options = options;
  stranger_options.job_token = "job/someone-else";
  auto stranger = Client::from_env(stranger_options);
  ASSERT_TRUE(stranger.ok());
  auto refused = stranger.value()->pull("w", out.data(), 4, DataType::fp32, 0);
  EXPECT_NE(refused.status().message().find("PERMISSION_DENIED"), std::string::npos)
      << refused.status().to_string();

  ::kill(shard.pid(), SIGKILL);
  shard.finish();
  ClientOptions quick = options;
  quick.timeout = std::chrono::seconds(2);
  auto after = Client::from_env(quick);
  ASSERT_TRUE(after.ok());
  const auto start = std::chrono::steady_clock::now();
  auto gone = after.value()->pull("w", out.data(), 4, DataType::fp32, 0);
  EXPECT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("shard 0"), std::string::npos) << gone.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

// `weft run -n 2 --ps 2`: the launcher starts two shards with the job's store and key; the
// workers find them through the store and train a tensor spread over both; the shards are
// stopped once the workers are done and the job exits 0.
TEST(PsServeProcess, WeftRunStartsShardsBesideTheRanks) {
  weft::test::ToolResult r = weft::test::run_tool(
      {"run", "-n", "2", "--ps", "2", "--timeout", "60", "--", WEFT_PS_WORKER_PATH});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[0] worker 0: ps ok (2 shards)"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("[1] worker 1: ps ok (2 shards)"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("[ps1] weft ps shard 1 of 2 serving on"), std::string::npos) << r.out;
}

// A shard that dies while the ranks run ends the job, naming it.
TEST(PsServeProcess, WeftRunEndsTheJobWhenAShardFails) {
  weft::test::ToolResult r = weft::test::run_tool(
      {"run", "-n", "1", "--ps", "1", "--timeout", "60", "--", "sh", "-c",
       // The launcher's children are this job's rank (`sh -c ...`, whose text says "ps serve"
       // too) and its shard (`weft ps serve ...` once it has started): kill the shard by its pid.
       "for i in $(seq 200); do for p in $(cat /proc/$PPID/task/*/children); do "
       "if tr '\\0' ' ' < /proc/$p/cmdline | grep -q '^[^ ]* ps serve '; then "
       "kill -KILL $p; exec sleep 30; fi; done; sleep 0.05; done"});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("ps shard 0 failed"), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed, std::chrono::seconds(20));
}

}  // namespace
}  // namespace weft::ps
