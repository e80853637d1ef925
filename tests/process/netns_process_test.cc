// A rank that loses its network: two ranks in network namespaces of their own, joined by a veth
// pair this test creates (addresses inside those namespaces only), run allreduces over TCP; the
// test takes the link down and both ranks must fail within about peer_timeout, naming the other
// rank as not responding. Needs root (ip netns); skipped, saying why, where that is not allowed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// /bin/sh -c CMD with stdout and stderr to `log`, in a process group of its own.
pid_t spawn(const std::string& cmd, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const std::string full = "exec " + cmd + " >" + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits for `pid` until `deadline`; true if it exited.
bool reap(pid_t pid, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

void kill_group(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

class TwoNamespaces {
 public:
  TwoNamespaces() {
    const std::string id = std::to_string(::getpid());
    a_ = "weft-a-" + id;
    b_ = "weft-b-" + id;
    va_ = "wfa" + id;
    vb_ = "wfb" + id;
    ok_ = sh("ip netns add " + a_) && sh("ip netns add " + b_) &&
          sh("ip link add " + va_ + " type veth peer name " + vb_) &&
          sh("ip link set " + va_ + " netns " + a_) && sh("ip link set " + vb_ + " netns " + b_) &&
          sh("ip -n " + a_ + " addr add 10.213.0.1/24 dev " + va_) &&
          sh("ip -n " + b_ + " addr add 10.213.0.2/24 dev " + vb_) &&
          sh("ip -n " + a_ + " link set " + va_ + " up") &&
          sh("ip -n " + b_ + " link set " + vb_ + " up") && sh("ip -n " + a_ + " link set lo up") &&
          sh("ip -n " + b_ + " link set lo up");
  }
  ~TwoNamespaces() {
    sh("ip netns del " + a_);
    sh("ip netns del " + b_);  // the veth pair goes with them
  }
  bool ok() const { return ok_; }
  std::string exec_a() const { return "ip netns exec " + a_ + " "; }
  std::string exec_b() const { return "ip netns exec " + b_ + " "; }
  bool cut() const { return sh("ip -n " + a_ + " link set " + va_ + " down"); }
  const std::string& va() const { return va_; }
  const std::string& vb() const { return vb_; }

 private:
  std::string a_, b_, va_, vb_;
  bool ok_ = false;
};

TEST(NetworkLoss, BothRanksDeclareTheOtherFailedWhenTheLinkGoesDown) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
  TwoNamespaces ns;
  if (!ns.ok()) GTEST_SKIP() << "cannot create network namespaces and a veth pair here";
  // Per-process names, removed first: a stale log from an earlier run would give a stale port.
  const std::string dir = ::testing::TempDir() + "weft-netns-" + std::to_string(::getpid()) + "-";
  const std::string store_log = dir + "store.log";
  const std::string log0 = dir + "rank0.log", log1 = dir + "rank1.log";
  for (const std::string& f : {store_log, log0, log1}) std::remove(f.c_str());
  pid_t store = spawn(ns.exec_a() + WEFT_TOOL_PATH + " store --host 10.213.0.1 --port 0", store_log);
  std::string port;
  for (auto t0 = Clock::now(); port.empty() && Clock::now() - t0 < 10s;) {
    const std::string text = slurp(store_log);
    const size_t at = text.find("listening on 10.213.0.1:");
    if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
      port = text.substr(at + 24, text.find('\n', at) - at - 24);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  ASSERT_FALSE(port.empty()) << slurp(store_log);
  auto rank_cmd = [&](int rank, const std::string& exec, const std::string& iface) {
    return exec + "env WEFT_RANK=" + std::to_string(rank) +
           " WEFT_SIZE=2 WEFT_STORE_ADDR=10.213.0.1:" + port + " WEFT_HOST_ID=host" +
           std::to_string(rank) + " WEFT_IFACE=" + iface +
           " WEFT_PEER_TIMEOUT=1s WEFT_TIMEOUT=60s " + WEFT_CHILD_PATH + " -1 100000000";
  };
  pid_t r0 = spawn(rank_cmd(0, ns.exec_a(), ns.va()), log0);
  pid_t r1 = spawn(rank_cmd(1, ns.exec_b(), ns.vb()), log1);
  // Let them connect and run allreduces for a moment (rank 0 prints the store line once joined).
  for (auto t0 = Clock::now(); slurp(log0).find("store") == std::string::npos && Clock::now() - t0 < 20s;) {
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(500ms);
  ASSERT_TRUE(slurp(log0).find("failed") == std::string::npos) << slurp(log0);
  const auto cut_at = Clock::now();
  ASSERT_TRUE(ns.cut());
  const bool ended0 = reap(r0, cut_at + 15s);
  const bool ended1 = reap(r1, cut_at + 15s);
  const auto took = Clock::now() - cut_at;
  if (!ended0) kill_group(r0);
  if (!ended1) kill_group(r1);
  kill_group(store);
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
