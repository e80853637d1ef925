// `weft run` end to end: real launcher, real child processes (small sh scripts).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <set>

#include "process/tool_process.h"

namespace weft::test {
namespace {

using std::chrono::milliseconds;

// `weft run -n N [extra...] sh -c SCRIPT`
ToolResult run_sh(int n, const std::string& script, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run", "-n", std::to_string(n)};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"sh", "-c", script});
  return run_tool(args);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(LauncherTest, SetsRankEnvironment) {
  auto r = run_sh(3,
                  "echo \"$WEFT_RANK $WEFT_SIZE $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE "
                  "$WEFT_STORE_ADDR ${WEFT_HOST_ID-none}\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = r.out_lines();
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::regex pattern(R"(\[(\d)\] (\d) 3 (\d) 3 127\.0\.0\.1:(\d+) none)");
  std::set<std::string> ranks, ports;
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << line;
    EXPECT_EQ(m[1], m[2]) << "prefix and WEFT_RANK differ: " << line;
    EXPECT_EQ(m[2], m[3]) << "one host: local rank = rank: " << line;
    ranks.insert(m[2]);
    ports.insert(m[4]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(ports.size(), 1u) << "every rank must get the same store";
}

TEST(LauncherTest, HostIdsGiveLocalRanksPerHost) {
  auto r = run_sh(4, "echo \"$WEFT_RANK $WEFT_HOST_ID $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE\"",
                  {"--host-ids", "a,b,a,b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> lines;
  for (const auto& l : r.out_lines()) lines.insert(l);
  EXPECT_EQ(lines,
            (std::set<std::string>{"[0] 0 a 0 2", "[1] 1 b 0 2", "[2] 2 a 1 2", "[3] 3 b 1 2"}));
}

TEST(LauncherTest, HostIdForEveryRank) {
  auto r = run_sh(2, "echo \"$WEFT_HOST_ID\"", {"--host-id", "node7"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[0] node7\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "[1] node7\n")) << r.out;
}

TEST(LauncherTest, RejectsWrongNumberOfHostIds) {
  auto r = run_sh(3, "true", {"--host-ids", "a,b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--host-ids names 2 hosts for 3 ranks")) << r.err;
}

TEST(LauncherTest, PrefixesEveryLineOfBothStreams) {
  auto r = run_sh(2,
                  "echo out1; echo err1 >&2; printf 'two\\nlines\\n'; "
                  "head -c 100000 /dev/zero | tr '\\0' x; echo; printf no-newline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string rank : {"[0] ", "[1] "}) {
    EXPECT_TRUE(contains(r.out, rank + "out1\n")) << r.out.substr(0, 400);
    EXPECT_TRUE(contains(r.out, rank + "two\n" + rank + "lines\n"));
    EXPECT_TRUE(contains(r.out, rank + std::string(100000, 'x') + "\n"));
    EXPECT_TRUE(contains(r.out, rank + "no-newline\n")) << "partial line at exit is flushed";
    EXPECT_TRUE(contains(r.err, rank + "err1\n")) << r.err;
  }
  for (const auto& line : r.out_lines()) {
    EXPECT_TRUE(line.rfind("[0] ", 0) == 0 || line.rfind("[1] ", 0) == 0) << line.substr(0, 80);
  }
}

TEST(LauncherTest, PassesArgumentsAfterDashDash) {
  auto r = run_tool({"run", "-n", "1", "--", "sh", "-c", "echo \"$# $*\"", "sh", "-n", "3", "--"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] 3 -n 3 --\n");
}

TEST(LauncherTest, OneFailureStopsTheOthers) {
  auto r = run_sh(3, "if [ $WEFT_RANK = 1 ]; then sleep 0.2; exit 3; fi; sleep 30");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_LT(r.elapsed, milliseconds(5000));
  EXPECT_TRUE(contains(r.err, "rank 1: exit 3\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 0: terminated by launcher after rank 1 failed")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 2: terminated by launcher after rank 1 failed")) << r.err;
}

TEST(LauncherTest, ReportsARankKilledBySignal) {
  auto r = run_sh(3, "if [ $WEFT_RANK = 2 ]; then sleep 0.2; kill -9 $$; fi; sleep 30");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_TRUE(contains(r.err, "rank 2: killed by signal 9 (SIGKILL)")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 0: terminated by launcher after rank 2 failed")) << r.err;
}

TEST(LauncherTest, KillsRanksThatIgnoreSigtermAfterTheGracePeriod) {
  auto r = run_sh(2,
                  "trap '' TERM; if [ $WEFT_RANK = 0 ]; then sleep 0.2; exit 1; fi; "
                  "while :; do sleep 0.1; done",
                  {"--grace", "0.3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_LT(r.elapsed, milliseconds(5000));
  EXPECT_TRUE(contains(r.err,
                       "rank 1: terminated by launcher after rank 0 failed: killed by "
                       "signal 9 (SIGKILL)"))
      << r.err;
}

// The launcher receives `sig` while 3 ranks wait: each must see it (and say so), and the job
// ends with 128 + sig.
void expect_forwarded(int sig, const std::string& trap_name, const std::string& sig_name) {
  ToolProcess p({"run", "-n", "3", "sh", "-c",
                 "trap 'echo got-" + trap_name + "; exit 0' " + trap_name +
                     "; echo ready; sleep 30 & wait"});
  ASSERT_TRUE(p.wait_for_lines("ready", 3));
  ::kill(p.pid(), sig);
  auto r = p.finish();
  EXPECT_EQ(r.exit_code, 128 + sig);
  EXPECT_LT(r.elapsed, milliseconds(20000));
  for (const std::string rank : {"[0] ", "[1] ", "[2] "}) {
    EXPECT_TRUE(contains(r.out, rank + "got-" + trap_name + "\n")) << r.out;
  }
  EXPECT_TRUE(contains(r.err, "got " + sig_name + "; forwarding it to all 3 ranks")) << r.err;
}

TEST(LauncherTest, ForwardsSigintToEveryRank) { expect_forwarded(SIGINT, "INT", "SIGINT"); }

TEST(LauncherTest, ForwardsSigtermToEveryRank) { expect_forwarded(SIGTERM, "TERM", "SIGTERM"); }

TEST(LauncherTest, TimeoutEndsTheJobWith124) {
  auto r = run_sh(2, "sleep 30", {"--timeout", "0.5"});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_LT(r.elapsed, milliseconds(5000));
  EXPECT_TRUE(contains(r.err, "rank 0: terminated by launcher after the 500 ms timeout")) << r.err;
}

TEST(LauncherTest, AllRanksMustSucceed) {
  EXPECT_EQ(run_sh(4, "exit 0").exit_code, 0);
  auto r = run_sh(2, "if [ $WEFT_RANK = 1 ]; then sleep 0.5; exit 1; fi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "rank 0: exit 0\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1: exit 1\n")) << r.err;
}

TEST(LauncherTest, MissingProgramFailsWith127) {
  auto r = run_tool({"run", "-n", "2", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_TRUE(contains(r.err, "exec(/nonexistent/program)")) << r.err;
}

// Usage errors exit with 2 whatever the command (CLI11's own codes are 101-115); help and
// --version with 0.
TEST(LauncherTest, UsageErrorsExitWith2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--no-such-option", "true"},
        std::vector<std::string>{"run", "-n", "zero", "true"},
        std::vector<std::string>{"frobnicate"}, std::vector<std::string>{},
        std::vector<std::string>{"bench", "allreduce", "--no-such-option"},
        std::vector<std::string>{"diag", "--no-such-option"}}) {
    auto r = run_tool(args);
    EXPECT_EQ(r.exit_code, 2) << (args.empty() ? std::string("(no arguments)") : args[0]) << ": "
                              << r.err;
  }
  EXPECT_EQ(run_tool({"--help"}).exit_code, 0);
  EXPECT_EQ(run_tool({"run", "--help"}).exit_code, 0);
  EXPECT_EQ(run_tool({"--version"}).exit_code, 0);
}

// `weft diag --store` takes the same address forms as WEFT_STORE_ADDR, [IPv6]:port included.
TEST(LauncherTest, DiagAcceptsABracketedIpv6Store) {
  auto r = run_tool({"diag", "--store", "[::1]:1", "--wait", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "cannot reach the store at [::1]:1")) << r.err;
  auto bad = run_tool({"diag", "--store", "::1:1"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "is not host:port (use [addr]:port for IPv6)")) << bad.err;
}

// With no WEFT_AUTH_KEY_FILE of the user's, `weft run` makes the job key and hands it to its
// ranks as an inherited memfd (mode 0600, sealed): every rank reads the same 64 hex digits, and
// nothing is written to a file system (TMPDIR stays empty).
TEST(LauncherTest, JobKeyReachesTheRanksThroughAnInheritedMemfd) {
  const std::string tmp = ::testing::TempDir() + "weft-key-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(tmp);
  ASSERT_TRUE(std::filesystem::create_directories(tmp));
  ::unsetenv("WEFT_AUTH_KEY_FILE");
  ScopedEnv env({{"TMPDIR", tmp.c_str()}});
  auto r = run_sh(2,
                  "echo \"path=$WEFT_AUTH_KEY_FILE mode=$(stat -L -c %a \"$WEFT_AUTH_KEY_FILE\") "
                  "key=$(cat \"$WEFT_AUTH_KEY_FILE\")\"; "
                  "printf x >>\"$WEFT_AUTH_KEY_FILE\" 2>/dev/null && echo writable || echo sealed");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::regex line(R"(\[(\d)\] path=/proc/self/fd/(\d+) mode=600 key=([0-9a-f]{64}))");
  std::set<std::string> keys;
  int sealed = 0;
  for (const auto& l : r.out_lines()) {
    std::smatch m;
    if (std::regex_match(l, m, line)) keys.insert(m[3]);
    if (contains(l, "] sealed")) ++sealed;
  }
  EXPECT_EQ(keys.size(), 1u) << r.out;
  EXPECT_EQ(sealed, 2) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "weft run left files in " << tmp;
  std::filesystem::remove_all(tmp);
}

// A launcher killed with SIGKILL cannot stop its ranks itself: they end anyway (parent-death
// signal), instead of running on and holding their CPUs and ports.
TEST(LauncherTest, RanksEndWhenTheLauncherIsKilled) {
  ToolProcess p({"run", "-n", "2", "sh", "-c", "echo pid=$$; exec sleep 60"});
  std::vector<pid_t> ranks;
  for (int i = 0; i < 2; ++i) {
    const std::string line = p.wait_for_line("pid=");
    ASSERT_FALSE(line.empty());
    ranks.push_back(static_cast<pid_t>(std::stol(line.substr(line.find("pid=") + 4))));
  }
  ::kill(p.pid(), SIGKILL);
  p.finish();
  for (pid_t rank : ranks) {
    // Gone, or a zombie waiting for init to reap it: either way no longer running. Polled (the
    // signal is immediate; the bound is only there so a regression fails instead of hanging).
    bool ended = false;
    for (int i = 0; i < 500 && !ended; ++i) {
      std::ifstream stat("/proc/" + std::to_string(rank) + "/stat");
      std::string all;
      std::getline(stat, all);
      const size_t paren = all.rfind(')');
      ended = !stat.good() || (paren != std::string::npos && paren + 2 < all.size() &&
                               all[paren + 2] == 'Z');
      if (!ended) std::this_thread::sleep_for(milliseconds(20));
    }
    EXPECT_TRUE(ended) << "rank process " << rank << " outlived its killed launcher";
  }
}

}  // namespace
}  // namespace weft::test
