// Bootstrap: who am I and where is the store, from the environment a launcher gave this process.
//
// detect_launch() is a pure function of an environment map, so every rule is unit-testable; the
// only place that reads the real environment is current_environment(). The rules (weft run,
// torchrun, Open MPI, Slurm, WEFT_* variables) and their precedence are written down in
// docs/rendezvous.md. WEFT_* variables always override the field they name. Errors are
// invalid_argument and name the variable and its value, e.g. "WEFT_RANK='abc' is not an integer".
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "weft/status.h"
#include "weft/store.h"

namespace weft {

using EnvMap = std::map<std::string, std::string>;

// A copy of this process's environment (environ).
EnvMap current_environment();

struct LaunchInfo {
  int rank = -1, size = -1, local_rank = -1, local_size = -1;  // -1: the launcher did not say
  std::string store_host;
  uint16_t store_port = 0;
  // True: this rank must start the TcpStoreServer on store_port (rank 0 when nothing else
  // serves it).
  bool host_store = false;
  std::string host_id;  // WEFT_HOST_ID if set, else empty
  // WEFT_JOIN=1: this process joins a running job through grow() (Communicator::from_env)
  // instead of starting one; weft run sets it on the ranks it restarts.
  bool join = false;
  std::string rule;     // which rule applied, for logs and error messages
};

Result<LaunchInfo> detect_launch(const EnvMap& env);

// Opens the store described by info: if info.host_store, starts a TcpStoreServer on every
// address at store_port (kept alive in *server_out) and connects to it over loopback; else
// connects as a client to store_host:store_port. Waits up to timeout for the store.
Result<std::shared_ptr<Store>> open_launch_store(const LaunchInfo& info,
                                                 std::chrono::milliseconds timeout,
                                                 std::unique_ptr<TcpStoreServer>* server_out);

}  // namespace weft
