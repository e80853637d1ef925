// Test networks of network namespaces: one namespace per host, joined by veth pairs and bridges,
// every link capped by `tc tbf` (tests/netns/README.md). A Network is built by netns.sh (the
// same script people use by hand), lives as long as the object and is deleted with everything
// running inside it when the object goes, and also when the test process dies any other way
// (a guard process holds the other end of a pipe and deletes the network at its end of file).
//
//   if (auto why = netns::unavailable(); !why.empty()) GTEST_SKIP() << why;
//   auto net = netns::Network::two_racks();
//   ASSERT_TRUE(net.ok()) << net.error();
//   std::string out;
//   int rc = netns::shell(net.run_command(WEFT_TOOL_PATH, "weft bench all --check"), &out);
//
// Needs root (ip netns, tc). Names are unique per process and per network, so parallel ctest
// runs never collide; addresses (10.77.x.y) exist only inside the namespaces. One thread builds
// and deletes a network; the const members may be called from any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"

namespace weft::test::netns {

// Why test networks cannot be built here ("" when they can): not root, or `ip netns add` fails.
const std::string& unavailable();

// Runs `/bin/sh -c cmd` with stdout and stderr appended to *out (when given); its exit code
// (128 + signal when a signal ended it).
int shell(const std::string& cmd, std::string* out = nullptr);

// `s` quoted for /bin/sh.
std::string quote(const std::string& s);

// A shell command running in a process group of its own, stdout and stderr to a log file.
// Move-only; the whole group is killed (SIGKILL) and reaped when the handle goes.
class Process {
 public:
  static Process start(const std::string& cmd, const std::string& log);
  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  ~Process();

  pid_t pid() const { return pid_; }
  // Waits until `deadline`; the exit code once it ended (128 + signal), nullopt while it runs.
  std::optional<int> wait_until(Clock::time_point deadline);
  void kill();

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

struct Host {
  std::string name;   // h0, h1, ...
  std::string ns;     // its network namespace (ip netns exec NS ...)
  std::string group;  // rack-ra, zone-z1, or "-"
  std::vector<std::string> addresses;  // IPv4, one per interface
};

struct Link {
  std::string name;  // h0 (a host's link to its switch), uplink, rail0, z1-z2, link
  std::string ns_a, if_a, ns_b, if_b;
  int mbit = 0;
};

// What Network::run_command starts: `ranks_per_host` ranks on each of `hosts` (all hosts in
// order when empty), ranks of one host consecutive; the job is killed after `timeout_s`.
struct JobLayout {
  std::vector<std::string> hosts;
  int ranks_per_host = 1;
  int timeout_s = 120;
};

class Network {
 public:
  // The topologies of netns.sh: (a) two hosts on one 1 gbit link ("link"); (b) h0 h1 in rack ra,
  // h2 h3 in rack rb, 1 gbit host links (named after the host), a 200 mbit "uplink"; (c) two
  // hosts on two 500 mbit links "rail0" and "rail1", a subnet each; (d) zones z0 z1 z2 of two
  // hosts each, 1 gbit host links, "z0-z1" at 1 gbit and the slow "z1-z2" at 100 mbit.
  static Network pair() { return Network("pair"); }
  static Network two_racks() { return Network("two_racks"); }
  static Network rails() { return Network("rails"); }
  static Network zones() { return Network("zones"); }

  explicit Network(const std::string& topology);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  const std::vector<Host>& hosts() const { return hosts_; }
  const std::vector<Link>& links() const { return links_; }
  // The host or link of that name; throws std::out_of_range when there is none.
  const Host& host(const std::string& name) const;
  const Link& link(const std::string& name) const;
  // A host's first address.
  const std::string& address(const std::string& host_name) const;

  // "ip netns exec NS ": prefix of a command line that runs inside the host's namespace.
  std::string in(const std::string& host_name) const;
  // Runs `/bin/sh -c cmd` inside the host's namespace, as shell().
  int exec(const std::string& host_name, const std::string& cmd, std::string* out = nullptr) const;
  Process spawn(const std::string& host_name, const std::string& cmd, const std::string& log) const;
  // The command line of a weft job on this network (`netns.sh run`): `weft run` from
  // `weft_path` with one host id per host, each rank in its host's namespace, rank 0 hosting
  // the store. `program` is a shell word list ("weft bench all --check").
  std::string run_command(const std::string& weft_path, const std::string& program,
                          const JobLayout& layout = {}) const;

  // Cuts (false) or restores (true) a link at both ends.
  bool set_link(const std::string& link_name, bool up) const;
  // Changes a link's cap in both directions.
  bool set_rate(const std::string& link_name, int mbit) const;

 private:
  bool parse(const std::string& description);
  void start_guard();

  std::string name_;
  std::string error_;
  std::vector<Host> hosts_;
  std::vector<Link> links_;
  pid_t guard_ = -1;
  int guard_fd_ = -1;  // the write end of the guard's stdin; closing it deletes the network
};

// Moves the calling thread into a host's network namespace until it goes (network namespaces
// are per thread; a socket keeps the namespace it was created in after the thread leaves).
class InNamespace {
 public:
  InNamespace(const Network& net, const std::string& host_name);
  ~InNamespace();
  InNamespace(const InNamespace&) = delete;
  InNamespace& operator=(const InNamespace&) = delete;
  bool ok() const { return entered_; }

 private:
  int home_fd_ = -1;
  bool entered_ = false;
};

}  // namespace weft::test::netns
