// MetricsTargets: `weft run --metrics-sd FILE` keeps FILE a Prometheus file_sd target list of the
// job's metrics endpoints while the job runs.
//
// Every rank with Options::metrics_addr publishes its endpoint as weft-metrics/rank<r> in the
// job's store (core/metrics.cc). A thread of the launcher reads those keys every 250 ms through a
// client of the launcher's own store and rewrites FILE (write + rename, so Prometheus never reads
// half a file) whenever the set changes: one target group per endpoint, labelled with its ranks
// (`weft_rank`). A rank replaced by --respawn publishes its new endpoint under the same key. At
// the end FILE is rewritten as an empty list, so Prometheus stops scraping ranks that are gone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "weft/status.h"
#include "weft/store.h"

namespace weft::launcher {

class MetricsTargets {
 public:
  // Writes an empty list to `file` at once (Prometheus may start first), then follows `store`.
  static Result<std::unique_ptr<MetricsTargets>> start(std::string file, int nranks,
                                                       std::shared_ptr<Store> store);
  ~MetricsTargets();  // stops the thread and empties the file

  // The file_sd JSON for these endpoints (index: rank; empty: not published yet).
  static std::string render(const std::vector<std::string>& endpoints);

 private:
  MetricsTargets(std::string file, int nranks, std::shared_ptr<Store> store);
  void loop();
  Status write(const std::string& json) const;

  const std::string file_;
  const int nranks_;
  std::shared_ptr<Store> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // under mu_
  std::thread thread_;
};

}  // namespace weft::launcher
