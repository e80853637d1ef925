// The process's Prometheus exposition of its communicators' metrics (docs/observability.md).
//
// Communicators that count (Options::metrics) register a source here; a scrape of the HTTP
// endpoint (prometheus-cpp's exposer on civetweb, one per process, started by the first
// communicator with Options::metrics_addr and kept until the process exits) and
// Communicator::metrics() both turn sources' snapshots into the text exposition format. The
// registry's mutex is held while a scrape reads the sources, so a communicator that unregisters
// waits for a scrape in progress and is never read after it is gone. Lock order: the registry's
// mutex, then whatever a source takes (the communicator's transport_mu_).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "weft/status.h"

namespace weft {

using MetricsSource = std::function<MetricsSnapshot()>;

// Adds a source read by every scrape; returns its handle for metrics_remove_source.
uint64_t metrics_add_source(MetricsSource source);
// Removes it; once this returns no scrape reads it any more.
void metrics_remove_source(uint64_t handle);

// Starts the process's endpoint at `addr` ("HOST:PORT"; port 0: the kernel picks) unless one runs
// already, and returns the address it serves on ("HOST:PORT" with the real port; a wildcard host
// is replaced by this machine's name). A second, different `addr` gets the running one's address
// (logged once).
Result<std::string> metrics_serve(const std::string& addr);

// The text exposition format (version 0.0.4) of these snapshots, with weft_build_info.
std::string metrics_text(const std::vector<MetricsSnapshot>& snapshots);

}  // namespace weft
