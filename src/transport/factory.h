// The one place that chooses and builds a communicator's transport, so that core/ names no
// implementation (it includes this header and transport.h only).
//
// With transport=auto or shm every rank publishes its host key (shm_host_key: host id, PID
// namespace, /dev/shm and user, so that only ranks that can open each other's segments count as
// one host) and the machine it runs on; from them:
//  - every rank on one host: shared memory;
//  - several hosts, some with several ranks: shared memory to the peers on this host and TCP to
//    the others (the mixed transport), when the machine's ranks fit its usable CPUs or
//    transport=shm asks for it; else TCP (hand-offs through shm's progress thread cost more
//    than loopback TCP when ranks outnumber cores: docs/configuration.md);
//  - otherwise TCP.
// transport=tcp exchanges no host keys and always builds TCP. Collective over the communicator:
// every rank calls it once, with the same token.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "security/job_key.h"
#include "security/suite.h"
#include "transport/host_layout.h"
#include "transport/transport.h"
#include "weft/options.h"
#include "weft/store.h"

namespace weft {

class BufferPool;

struct TransportSetup {
  Options options;     // rank, size and host_id (see default_host_id) filled
  uint64_t token = 0;  // the communicator's id, agreed by every rank
  // Ranks of the whole job on this machine; 0: count those that published this machine.
  int machine_ranks = 0;
  // The TCP links' security (docs/security.md): auth or encrypt need the job key, the same on
  // every rank. Shared memory stays within one user's processes and is not affected.
  security::SecurityMode security = security::SecurityMode::off;
  std::shared_ptr<const security::JobKey> job_key;
};

// Tests only: the security every TCP link built by make_transport uses when its TransportSetup
// asks for none (how the multi-rank suites run secured until Options carries the setting).
void set_tcp_security_for_testing(security::SecurityMode mode,
                                  std::shared_ptr<const security::JobKey> job_key);

struct BuiltTransport {
  std::unique_ptr<Transport> transport;
  // For logs and the flight record: "shm", "tcp", "tcp (alone on its host)",
  // "mixed (shm to ranks 1,2, tcp to the others)".
  std::string name;
  bool shm = false;                  // a shared-memory transport carries some of the traffic
  std::optional<HostLayout> layout;  // where the ranks are (not known with transport=tcp)
  int machine_ranks = 1;             // ranks of the job on this machine
};

Result<BuiltTransport> make_transport(const TransportSetup& setup, std::shared_ptr<Store> store,
                                      BufferPool& pool);

// Removes what the transports of the given processes, which must have exited, left on this host
// (shared-memory segments of ranks killed during set-up): for a launcher once its job is over.
// Returns how many objects were removed.
int remove_transport_leftovers(std::span<const pid_t> exited);

}  // namespace weft
