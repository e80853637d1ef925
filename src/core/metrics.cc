// CommunicatorImpl's metrics: registration with the process's Prometheus exposition, the address
// each rank publishes, and the snapshot a scrape reads (contract in communicator_impl.h).
#include <fmt/format.h>

#include "base/log.h"
#include "core/communicator_impl.h"
#include "core/metrics_export.h"

namespace weft {

Status CommunicatorImpl::start_metrics() {
  if (!options_.metrics) return Status();
  metrics_source_ = metrics_add_source([this] { return metrics_snapshot(); });
  if (options_.metrics_addr.empty()) return Status();
  auto serving = metrics_serve(options_.metrics_addr);
  if (!serving.ok()) {
    return serving.status().with_context(fmt::format("rank {}: metrics_addr", rank()));
  }
  metrics_serving_ = std::move(serving).value();
  return Status();
}

Status CommunicatorImpl::publish_metrics(int job_rank) {
  if (metrics_serving_.empty() || job_rank < 0) return Status();
  // `weft run --metrics-sd` and operators find the endpoints here.
  Status st = root_store_->set(fmt::format("weft-metrics/rank{}", job_rank), metrics_serving_);
  if (!st.ok()) {
    return st.with_context(fmt::format("rank {}: publishing the metrics address", rank()));
  }
  return Status();
}

void CommunicatorImpl::stop_metrics() {
  if (metrics_source_ == 0) return;
  metrics_remove_source(metrics_source_);
  metrics_source_ = 0;
}

MetricsSnapshot CommunicatorImpl::metrics_snapshot() const {
  MetricsSnapshot s;
  s.token = token_;
  s.rank = rank();
  s.size = size();
  s.transport = transport_name_;
  s.has_shm = transport_has_shm_;
  s.broken = is_broken_.load(std::memory_order_acquire);
  s.counters = &metrics_;
  MutexLock lock(transport_mu_);
  if (transport_) {
    s.transport_counters = transport_->counters();
    s.lost_peers = transport_->lost_peers().size();
  }
  return s;
}

std::string CommunicatorImpl::metrics_text() const {
  if (!options_.metrics) return weft::metrics_text({});
  return weft::metrics_text({metrics_snapshot()});
}

}  // namespace weft
