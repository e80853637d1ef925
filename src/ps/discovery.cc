// open_job_store: the launcher's rules applied to a process that may not be a rank.
#include "discovery.h"

namespace weft::ps {

Result<JobStore> open_job_store(const EnvMap& env_in, const std::string& store_addr,
                                std::chrono::milliseconds timeout) {
  EnvMap env = env_in;
  if (!store_addr.empty()) env["WEFT_STORE_ADDR"] = store_addr;
  Result<LaunchInfo> info = detect_launch(env);
  const bool is_rank = info.ok();
  if (!is_rank) {
    EnvMap posed = env;
    if (env.count("WEFT_STORE_ADDR")) {
      posed.erase("RANK");
      posed["WEFT_RANK"] = "0";
      posed["WEFT_SIZE"] = "1";
    } else if (env.count("MASTER_ADDR") && env.count("MASTER_PORT")) {
      posed["RANK"] = "0";
      posed["WORLD_SIZE"] = "1";
    } else {
      return Status(ErrorCode::invalid_argument,
                    "no store: pass --store HOST:PORT or set WEFT_STORE_ADDR (or MASTER_ADDR and "
                    "MASTER_PORT) as the job's launcher does");
    }
    info = detect_launch(posed);
    if (!info.ok()) return info.status();
  }
  LaunchInfo launch = std::move(info.value());
  launch.host_store = false;  // the shard or client is never the one that serves it
  Result<std::shared_ptr<const security::JobKey>> key = read_launch_key(launch);
  if (!key.ok()) return key.status();
  Result<std::shared_ptr<Store>> store = open_launch_store(launch, timeout, nullptr, key.value());
  if (!store.ok()) return store.status();
  JobStore out;
  out.store = std::move(store.value());
  out.token = job_namespace(launch.job_id, key.value().get());
  out.rank = is_rank ? launch.rank : -1;
  out.rule = launch.rule;
  return out;
}

}  // namespace weft::ps
