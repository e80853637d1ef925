#include "transport/factory.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/cpus.h"
#include "base/log.h"
#include "transport/mixed/mixed_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace weft {
namespace {

struct TestingSecurity {
  security::SecurityMode mode = security::SecurityMode::off;
  std::shared_ptr<const security::JobKey> job_key;
};
TestingSecurity& testing_security() {
  static TestingSecurity s;
  return s;
}

}  // namespace

void set_tcp_security_for_testing(security::SecurityMode mode,
                                  std::shared_ptr<const security::JobKey> job_key) {
  testing_security() = {mode, std::move(job_key)};
}

Result<BuiltTransport> make_transport(const TransportSetup& setup, std::shared_ptr<Store> store,
                                      BufferPool& pool) {
  const Options& options = setup.options;
  const int rank = options.rank;
  const int size = options.size;
  BuiltTransport built;
  bool use_shm = false;
  if (options.transport != TransportKind::tcp) {
    // "<host key>\n<machine key>": the host id may be overridden, the machine is the real one
    // (its CPUs are shared by every rank on it, whatever namespaces they are in).
    const std::string machine = default_host_id();
    auto both =
        exchange_host_keys(*store, rank, size, shm_host_key(options.host_id) + "\n" + machine,
                           options.connect_timeout);
    if (!both.ok()) return both.status();
    std::vector<std::string> keys;
    int same_machine = 0;
    for (const std::string& k : both.value()) {
      const size_t nl = k.find('\n');
      keys.push_back(k.substr(0, nl));
      if (nl != std::string::npos && k.substr(nl + 1) == machine) ++same_machine;
    }
    built.machine_ranks = setup.machine_ranks > 0 ? setup.machine_ranks : std::max(1, same_machine);
    built.layout = HostLayout::from_keys(keys);
    use_shm = built.layout->host_count() == 1;
  }
  const std::optional<HostLayout>& layout = built.layout;
  // Several hosts, some with several ranks: shm to the peers on this host, TCP to the others
  // (MixedTransport), when the machine's ranks fit its CPUs or transport=shm asks for it. Every
  // rank of a machine decides alike (the job's ranks there against its usable CPUs).
  const bool spans_hosts =
      !use_shm && layout && layout->host_count() > 1 && layout->max_local() > 1;
  const bool fits = built.machine_ranks <= usable_cpus();
  const bool mixed = spans_hosts && (options.transport == TransportKind::shm || fits);
  if (rank == 0) {
    log::info(
        "transport: {} ({} ranks{}{})",
        use_shm ? "shm"
        : mixed ? "shm within hosts, tcp between"
                : "tcp",
        size,
        use_shm       ? ", all on one host"
        : spans_hosts ? ", " + layout->describe()
                      : "",
        spans_hosts && !mixed
            ? "; tcp inside hosts too: the ranks outnumber the CPUs (transport=shm forces shm)"
            : "");
  }
  const std::vector<int> host =
      layout ? layout->hosts[static_cast<size_t>(layout->host_of[static_cast<size_t>(rank)])]
             : std::vector<int>{};
  auto make_shm = [&](Store& s) {
    ShmTransportConfig sc;
    sc.rank = rank;
    sc.size = size;
    sc.token = setup.token;
    sc.options = options;
    sc.machine_ranks = built.machine_ranks;
    if (mixed) {
      sc.members = host;
      sc.rank = layout->local_index[static_cast<size_t>(rank)];
      sc.size = static_cast<int>(host.size());
      sc.caller_progress = false;
      // Its own token per host: the pretend hosts of a test share one process (segment names
      // hold the token, index and pid).
      sc.token ^= 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(host.front() + 1);
    }
    return make_shm_transport(sc, s, pool);
  };
  auto make_tcp = [&]() {
    TcpTransportConfig tc;
    tc.rank = rank;
    tc.size = size;
    tc.token = setup.token;
    tc.host_id = options.host_id;
    tc.options = options;
    tc.security = setup.security;
    tc.job_key = setup.job_key;
    if (tc.security == security::SecurityMode::off) {
      tc.security = testing_security().mode;
      tc.job_key = testing_security().job_key;
    }
    return make_tcp_transport(tc, *store, pool);
  };
  if (use_shm) {
    auto shm = make_shm(*store);
    if (!shm.ok()) return shm.status();
    built.transport = std::move(shm.value());
    built.name = "shm";
    built.shm = true;
    return built;
  }
  if (!mixed || host.size() < 2) {
    auto tcp = make_tcp();
    if (!tcp.ok()) return tcp.status();
    built.transport = std::move(tcp.value());
    built.name = mixed ? "tcp (alone on its host)" : "tcp";
    return built;
  }
  auto tcp = make_tcp();
  if (!tcp.ok()) return tcp.status();
  auto prefixed = make_prefix_store(fmt::format("mixed/{}", host.front()), store);
  auto shm = make_shm(*prefixed);
  if (!shm.ok()) return shm.status();
  std::vector<bool> local(static_cast<size_t>(size), false);
  std::string peers;
  for (int r : host) {
    local[static_cast<size_t>(r)] = true;
    if (r != rank) peers += fmt::format("{}{}", peers.empty() ? "" : ",", r);
  }
  built.name = fmt::format("mixed (shm to ranks {}, tcp to the others)", peers);
  built.shm = true;
  built.transport = make_mixed_transport(rank, size, std::move(local), std::move(shm.value()),
                                         std::move(tcp.value()));
  return built;
}

int remove_transport_leftovers(std::span<const pid_t> exited) {
  return remove_shm_segments_of(exited);
}

}  // namespace weft
