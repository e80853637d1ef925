// Finding the job's store from a launcher's environment, for shards (`weft ps serve`, which are
// not ranks) and clients (Client::from_env). The launcher rules are rendezvous/bootstrap's; a
// process that is not a rank gets them by posing as a rank that does not host the store: with
// WEFT_STORE_ADDR as a WEFT_* rank, else with MASTER_ADDR/MASTER_PORT as a torchrun rank (so the
// agent-store rule, MASTER_PORT+1, holds too). The job token is the job's store namespace
// (bootstrap.h job_namespace: WEFT_JOB_ID, else derived from the job key), so a client of
// another job is refused; with neither, calls are not checked.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/bootstrap.h"
#include "weft/status.h"
#include "weft/store.h"

namespace weft::ps {

struct JobStore {
  std::shared_ptr<Store> store;  // inside the job's namespace
  std::string token;
  int rank = -1;  // the launcher's rank of this process, -1 when it is not a rank
  std::string rule;  // which launcher rule found the store
};

// `store_addr`: "host:port" overriding the environment (empty: from the environment).
Result<JobStore> open_job_store(const EnvMap& env, const std::string& store_addr,
                                std::chrono::milliseconds timeout);

}  // namespace weft::ps
