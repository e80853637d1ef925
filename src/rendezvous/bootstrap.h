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

#include "security/job_key.h"
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
  // WEFT_AUTH_KEY_FILE: the job key file (weft run sets it; other launchers: the user), empty
  // when unset. The store and the links authenticate with the key it holds (docs/security.md).
  std::string auth_key_file;
  // WEFT_JOB_ID: names the job's namespace in a shared store (job_namespace); empty when unset.
  std::string job_id;
  std::string rule;     // which rule applied, for logs and error messages
};

Result<LaunchInfo> detect_launch(const EnvMap& env);

// Opens the store described by info: if info.host_store, starts a TcpStoreServer on every
// address at store_port (kept alive in *server_out) and connects to it over loopback; else
// connects as a client to store_host:store_port. Waits up to timeout for the store.
// The prefix every key of the job lives under, so jobs that share a store (or reuse one) never
// see each other's keys: "job/<WEFT_JOB_ID>" when the launcher named the job, else
// "job/<16 hex digits of BLAKE2s("weft job namespace" || key)>" with a key (a fresh key per job,
// as weft run makes, is a fresh namespace), else "" (no id, no key: the store's root, as before).
std::string job_namespace(const std::string& job_id, const security::JobKey* key);

// `key`: the job key read from info.auth_key_file (read_launch_key); null: no authentication.
// The store returned is already inside job_namespace(info.job_id, key).
Result<std::shared_ptr<Store>> open_launch_store(const LaunchInfo& info,
                                                 std::chrono::milliseconds timeout,
                                                 std::unique_ptr<TcpStoreServer>* server_out,
                                                 std::shared_ptr<const security::JobKey> key =
                                                     nullptr);

// The key info.auth_key_file names, or null when it is empty.
Result<std::shared_ptr<const security::JobKey>> read_launch_key(const LaunchInfo& info);

}  // namespace weft
