// The shared-memory transport with real processes: nothing left in /dev/shm after a job, even one
// whose rank was killed (while it ran, or while it set up its segments: `weft run` removes those);
// leftovers of a job killed during set-up elsewhere are removed by the next job; a /dev/shm too
// small for the segments is a clear error saying how big it is and what is needed.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "process/tool_process.h"

namespace weft::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// weft segments in /dev/shm whose creating process is gone (what a leak looks like; segments of
// jobs running concurrently have live creators).
std::set<std::string> dead_weft_segments() {
  std::set<std::string> out;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    unsigned long long token = 0;
    int rank = 0, pid = 0;
    if (std::sscanf(e->d_name, "weft-%16llx-%d-%d", &token, &rank, &pid) != 3) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) out.insert(e->d_name);
  }
  ::closedir(dir);
  return out;
}

// A pid that is not running (a child that has exited and been reaped).
int dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(ShmProcessTest, NothingIsLeftInDevShmAfterACleanJobOrAKilledRank) {
  ::setenv("WEFT_TRANSPORT", "shm", 1);
  auto ok = run_tool({"run", "-n", "3", "--timeout", "60", WEFT_CHILD_PATH, "-1", "50"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_TRUE(dead_weft_segments().empty());
  auto killed = run_tool(
      {"run", "-n", "3", "--grace", "20", "--timeout", "60", WEFT_CHILD_PATH, "1", "400", "kill"});
  ::unsetenv("WEFT_TRANSPORT");
  EXPECT_NE(killed.exit_code, 0);
  // The survivors failed naming the dead rank instead of hanging in shared memory.
  EXPECT_TRUE(contains(killed.out, "peer lost")) << killed.out;
  EXPECT_TRUE(contains(killed.out, "rank 1")) << killed.out;
  EXPECT_TRUE(dead_weft_segments().empty());
}

// The parent pid of `pid` (-1 if it is gone).
pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  int ppid = -1;
  if (close == std::string::npos ||
      std::sscanf(line.c_str() + close + 1, " %*c %d", &ppid) != 1) {
    return -1;
  }
  return ppid;
}

TEST(ShmProcessTest, ARankKilledWhileSettingUpLeavesNothingInDevShm) {
  // Kill rank 0 (SIGKILL) the moment its segment appears in /dev/shm: before every rank has
  // mapped it, so nobody has unlinked it yet. The window is a few milliseconds; inotify reports
  // the creation within microseconds. The launcher must remove it once the job is over.
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int watch = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    ASSERT_GE(watch, 0);
    ASSERT_GE(::inotify_add_watch(watch, "/dev/shm", IN_CREATE), 0);
    std::atomic<pid_t> launcher{-1};
    std::atomic<bool> done{false};
    std::string killed;          // the victim's segment name (set by the watcher)
    bool present_after = false;  // it was still in /dev/shm after the kill
    std::thread watcher([&] {
      alignas(inotify_event) char buf[4096];
      while (!done.load() && killed.empty()) {
        pollfd pfd{watch, POLLIN, 0};
        if (::poll(&pfd, 1, 20) <= 0) continue;
        const ssize_t got = ::read(watch, buf, sizeof(buf));
        for (ssize_t off = 0; off < got;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
          off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
          unsigned long long token = 0;
          int rank = -1, pid = 0;
          if (ev->len == 0 || !killed.empty() ||
              std::sscanf(ev->name, "weft-%16llx-%d-%d", &token, &rank, &pid) != 3 || rank != 0) {
            continue;
          }
          while (launcher.load() < 0) std::this_thread::yield();
          if (parent_of(pid) != launcher.load()) continue;  // another job's rank 0
          ::kill(pid, SIGKILL);
          killed = ev->name;
          present_after = ::access(("/dev/shm/" + killed).c_str(), F_OK) == 0;
        }
      }
    });
    ::setenv("WEFT_TRANSPORT", "shm", 1);
    ToolProcess tool({"run", "-n", "3", "--grace", "2", "--timeout", "60", WEFT_CHILD_PATH, "-1",
                      "5"});
    launcher = tool.pid();
    auto r = tool.finish();
    ::unsetenv("WEFT_TRANSPORT");
    done = true;
    watcher.join();
    ::close(watch);
    if (killed.empty() || !present_after) continue;  // too late: the ranks had unlinked it
    EXPECT_NE(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "rank 0")) << r.err;
    EXPECT_NE(::access(("/dev/shm/" + killed).c_str(), F_OK), 0)
        << "/dev/shm/" << killed << " outlived the job";
    EXPECT_TRUE(dead_weft_segments().empty());
    return;
  }
  GTEST_SKIP() << "could not kill rank 0 inside its set-up window in 5 attempts";
}

TEST(ShmProcessTest, LeftoversOfAKilledSetUpAreRemovedByTheNextJob) {
  const std::string name = "/weft-00000000deadbeef-0-" + std::to_string(dead_pid());
  int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(dead_weft_segments().count(name.substr(1)), 1u);
  ::setenv("WEFT_TRANSPORT", "shm", 1);
  auto r = run_tool({"run", "-n", "2", "--timeout", "60", WEFT_CHILD_PATH, "-1", "5"});
  ::unsetenv("WEFT_TRANSPORT");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(dead_weft_segments().count(name.substr(1)), 0u);
  ::shm_unlink(name.c_str());
}

// What `weft bench` reports about single-copy reads: {messages, bytes, peers refused}; all -1
// when the line is missing.
struct SingleCopy {
  long long messages = -1, bytes = -1, refused = -1;
};
SingleCopy single_copy_line(const std::string& out) {
  SingleCopy s;
  const auto at = out.find("# shm single copy (rank 0): ");
  if (at != std::string::npos) {
    std::sscanf(out.c_str() + at,
                "# shm single copy (rank 0): %lld messages, %lld bytes read from the senders' "
                "memory; %lld peers",
                &s.messages, &s.bytes, &s.refused);
  }
  return s;
}

// Every collective with every message above 64 KiB single-copy (process_vm_readv from the
// sender's buffer), results checked; `wrapper` runs in front of each rank.
ToolResult bench_single_copy(const std::vector<std::string>& wrapper) {
  ::setenv("WEFT_TRANSPORT", "shm", 1);
  ::setenv("WEFT_SHM_CMA_THRESHOLD", "64K", 1);
  ::setenv("WEFT_LOG_LEVEL", "info", 1);
  std::vector<std::string> args = {"run", "-n", "3", "--timeout", "120", "--"};
  args.insert(args.end(), wrapper.begin(), wrapper.end());
  for (const char* a : {WEFT_TOOL_PATH, "bench", "all", "-b", "8", "-e", "2M", "-f", "16", "-n",
                        "2", "-w", "1", "--check"}) {
    args.emplace_back(a);
  }
  auto r = run_tool(args);
  ::unsetenv("WEFT_TRANSPORT");
  ::unsetenv("WEFT_SHM_CMA_THRESHOLD");
  ::unsetenv("WEFT_LOG_LEVEL");
  return r;
}

TEST(ShmProcessTest, LargeMessagesAreReadStraightFromTheSendersMemory) {
  auto r = bench_single_copy({});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(contains(r.out, "Wrong elements       : 1")) << r.out;
  const SingleCopy s = single_copy_line(r.out);
  if (s.messages == 0 && s.refused > 0 && contains(r.out + r.err, "memory is refused")) {
    GTEST_SKIP() << "the kernel refuses process_vm_readv here (the fallback ran, results checked)";
  }
  EXPECT_GT(s.messages, 10) << r.out;
  EXPECT_GT(s.bytes, s.messages * (64 << 10) - 1) << r.out;
  EXPECT_EQ(s.refused, 0) << r.out;
}

// The kernel refusing Cross-Memory Attach (a seccomp filter like a container runtime's default
// profile): each rank says so once per peer, the messages go through the ring instead, and every
// result is still right.
TEST(ShmProcessTest, RefusedSingleCopyFallsBackToTheRing) {
  auto r = bench_single_copy({WEFT_DENY_CMA_PATH});
  if (contains(r.out + r.err, "deny_cma: cannot install the seccomp filter")) {
    GTEST_SKIP() << "seccomp filters cannot be installed here: " << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(contains(r.out, "Wrong elements       : 1")) << r.out;
  const SingleCopy s = single_copy_line(r.out);
  EXPECT_EQ(s.messages, 0) << r.out;
  EXPECT_EQ(s.refused, 2) << r.out;  // rank 0's two peers
  const std::string all = r.out + r.err;
  EXPECT_TRUE(contains(all, "reading rank 1's memory is refused (Operation not permitted)")) << all;
}

TEST(ShmProcessTest, RanksThatSeeDifferentDevShmTalkOverTcp) {
  // Same hostname, boot id, PID namespace and user, but rank 0 has a /dev/shm of its own (as in
  // a container): it cannot open the other ranks' segments, so `auto` must not pick shm for it.
  if (std::system("unshare -m true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "cannot create a mount namespace here (unshare -m)";
  }
  const std::string child = std::string(WEFT_CHILD_PATH) + " -1 20";
  const std::string script = "if [ \"$WEFT_RANK\" = 0 ]; then exec unshare -m sh -c 'mount -t tmpfs "
                             "tmpfs /dev/shm && exec " + child + "'; else exec " + child + "; fi";
  ::setenv("WEFT_LOG_LEVEL", "info", 1);
  auto r = run_tool({"run", "-n", "3", "--timeout", "90", "--", "sh", "-c", script});
  ::unsetenv("WEFT_LOG_LEVEL");
  const std::string all = r.out + r.err;
  EXPECT_EQ(r.exit_code, 0) << all;
  // Rank 0 is a host of its own; ranks 1 and 2 share one (shm between them, tcp to rank 0).
  EXPECT_TRUE(contains(all, "2 hosts (1+2 ranks)")) << all;
}

TEST(ShmProcessTest, TooSmallDevShmIsAClearError) {
  // A private /dev/shm of 256 KiB needs a mount namespace (root, unshare).
  if (std::system("unshare -m true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "cannot create a mount namespace here (unshare -m)";
  }
  const std::string tool = WEFT_TOOL_PATH;
  const std::string script = "mount -t tmpfs -o size=256k tmpfs /dev/shm && exec " + tool +
                             " run -n 4 --timeout 60 " + WEFT_CHILD_PATH + " -1 5";
  ::setenv("WEFT_TRANSPORT", "shm", 1);
  auto r = run_tool({"run", "-n", "1", "--timeout", "90", "--", "unshare", "-m", "sh", "-c", script});
  ::unsetenv("WEFT_TRANSPORT");
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  const std::string all = r.out + r.err;
  EXPECT_TRUE(contains(all, "/dev/shm is too small")) << all;
  EXPECT_TRUE(contains(all, "MiB for its segment")) << all;
  EXPECT_TRUE(contains(all, "free of 0.2 MiB")) << all;
}

}  // namespace
}  // namespace weft::test
