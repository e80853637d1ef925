#include "netns/network.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace weft::test::netns {
namespace {

using namespace std::chrono_literals;

const std::string kScript = WEFT_NETNS_SCRIPT;

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string script(const std::string& args) { return "/bin/bash " + quote(kScript) + " " + args; }

}  // namespace

const std::string& unavailable() {
  static const std::string why = [] {
    if (::geteuid() != 0) return std::string("needs root for ip netns");
    const std::string probe = "weft-probe-" + std::to_string(::getpid());
    if (shell("ip netns add " + probe) != 0) {
      return std::string("cannot create network namespaces here (ip netns add failed)");
    }
    shell("ip netns del " + probe);
    if (shell("tc -V") != 0) return std::string("tc (iproute2) is not installed");
    return std::string();
  }();
  return why;
}

int shell(const std::string& cmd, std::string* out) {
  FILE* pipe = ::popen(("exec 2>&1; " + cmd).c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) {
    if (out != nullptr) out->append(buf, n);
  }
  return exit_code_of(::pclose(pipe));
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Process Process::start(const std::string& cmd, const std::string& log) {
  const std::string full = "exec " + cmd + " >" + quote(log) + " 2>&1";
  Process p;
  p.pid_ = ::fork();
  if (p.pid_ == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (p.pid_ > 0) ::setpgid(p.pid_, p.pid_);  // also here: no race with a kill right away
  return p;
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exit_code_(other.exit_code_) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    kill();
    pid_ = std::exchange(other.pid_, -1);
    exit_code_ = other.exit_code_;
  }
  return *this;
}

Process::~Process() { kill(); }

std::optional<int> Process::wait_until(Clock::time_point deadline) {
  while (pid_ > 0 && !exit_code_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = exit_code_of(status);
      break;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  return exit_code_;
}

void Process::kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);  // the group: whatever the shell started goes too
  if (!exit_code_) {
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) exit_code_ = exit_code_of(status);
  }
  pid_ = -1;
}

Network::Network(const std::string& topology) {
  static std::atomic<int> counter{0};
  name_ = "wn" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  if (!unavailable().empty()) {
    error_ = unavailable();
    return;
  }
  start_guard();  // first: whatever `up` creates is covered if this process dies during it
  std::string out;
  if (shell(script("up " + topology + " " + name_), &out) != 0 || !parse(out)) {
    error_ = "netns.sh up " + topology + " " + name_ + " failed: " + out;
  }
}

Network::~Network() {
  if (guard_ > 0) {
    ::close(guard_fd_);  // the guard reads its end of file and deletes the network
    ::waitpid(guard_, nullptr, 0);
  } else if (unavailable().empty()) {
    shell(script("down " + name_));
  }
}

void Network::start_guard() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  // Everything the child needs is built before fork: after it, only exec-safe calls.
  const std::string bash = "/bin/bash";
  const std::string name = name_;
  guard_ = ::fork();
  if (guard_ == 0) {
    ::dup2(fds[0], STDIN_FILENO);  // the copy is not close-on-exec
    ::setpgid(0, 0);  // out of the test's group: a signal meant for the test does not reach it
    ::execl(bash.c_str(), "bash", kScript.c_str(), "guard", name.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[0]);
  if (guard_ < 0) {
    ::close(fds[1]);
    return;
  }
  guard_fd_ = fds[1];
}

bool Network::parse(const std::string& description) {
  std::istringstream lines(description);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "host") {
      Host h;
      words >> h.name >> h.ns >> h.group;
      for (std::string a; words >> a;) h.addresses.push_back(a);
      if (h.addresses.empty()) return false;
      hosts_.push_back(std::move(h));
    } else if (kind == "link") {
      Link l;
      if (!(words >> l.name >> l.ns_a >> l.if_a >> l.ns_b >> l.if_b >> l.mbit)) return false;
      links_.push_back(std::move(l));
    }
  }
  return !hosts_.empty();
}

const Host& Network::host(const std::string& name) const {
  for (const Host& h : hosts_) {
    if (h.name == name) return h;
  }
  throw std::out_of_range("network " + name_ + " has no host " + name);
}

const Link& Network::link(const std::string& name) const {
  for (const Link& l : links_) {
    if (l.name == name) return l;
  }
  throw std::out_of_range("network " + name_ + " has no link " + name);
}

const std::string& Network::address(const std::string& host_name) const {
  return host(host_name).addresses.front();
}

std::string Network::in(const std::string& host_name) const {
  return "ip netns exec " + host(host_name).ns + " ";
}

int Network::exec(const std::string& host_name, const std::string& cmd, std::string* out) const {
  return shell(in(host_name) + "/bin/sh -c " + quote(cmd), out);
}

Process Network::spawn(const std::string& host_name, const std::string& cmd,
                       const std::string& log) const {
  return Process::start(in(host_name) + "/bin/sh -c " + quote(cmd), log);
}

std::string Network::run_command(const std::string& weft_path, const std::string& program,
                                 const JobLayout& layout) const {
  std::string hosts;
  for (const std::string& h : layout.hosts) hosts += (hosts.empty() ? "" : ",") + h;
  return script("run " + name_ + (hosts.empty() ? "" : " --hosts " + hosts) + " --per-host " +
                std::to_string(layout.ranks_per_host) + " --timeout " +
                std::to_string(layout.timeout_s) + " --weft " + quote(weft_path) + " -- " +
                program);
}

bool Network::set_link(const std::string& link_name, bool up) const {
  return shell(script("link " + name_ + " " + quote(link_name) + (up ? " up" : " down"))) == 0;
}

bool Network::set_rate(const std::string& link_name, int mbit) const {
  return shell(script("rate " + name_ + " " + quote(link_name) + " " + std::to_string(mbit))) == 0;
}

InNamespace::InNamespace(const Network& net, const std::string& host_name) {
  home_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int fd = ::open(("/run/netns/" + net.host(host_name).ns).c_str(), O_RDONLY | O_CLOEXEC);
  entered_ = home_fd_ >= 0 && fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
  if (fd >= 0) ::close(fd);
}

InNamespace::~InNamespace() {
  if (entered_) ::setns(home_fd_, CLONE_NEWNET);
  if (home_fd_ >= 0) ::close(home_fd_);
}

}  // namespace weft::test::netns
