#include "core/metrics_export.h"

#include <fmt/format.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "base/log.h"
#include "base/mutex.h"
#include "weft/version.h"

namespace weft {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The first word of the transport's description: "tcp", "shm", "mixed", "local".
std::string transport_class(const std::string& name) {
  const size_t end = name.find(' ');
  return name.substr(0, end);
}

// Families in a fixed order, each filled from every snapshot.
class FamilyBuilder {
 public:
  MetricFamily& family(const std::string& name, const std::string& help, MetricType type) {
    auto [it, fresh] = index_.try_emplace(name, families_.size());
    if (fresh) families_.push_back(MetricFamily{name, help, type, {}});
    return families_[it->second];
  }
  ClientMetric& add(const std::string& name, const std::string& help, MetricType type,
                    std::vector<ClientMetric::Label> labels) {
    MetricFamily& f = family(name, help, type);
    f.metric.emplace_back();
    f.metric.back().label = std::move(labels);
    return f.metric.back();
  }
  void counter(const std::string& name, const std::string& help,
               std::vector<ClientMetric::Label> labels, double value) {
    add(name, help, MetricType::Counter, std::move(labels)).counter.value = value;
  }
  void gauge(const std::string& name, const std::string& help,
             std::vector<ClientMetric::Label> labels, double value) {
    add(name, help, MetricType::Gauge, std::move(labels)).gauge.value = value;
  }
  std::vector<MetricFamily> take() { return std::move(families_); }

 private:
  std::vector<MetricFamily> families_;
  std::map<std::string, size_t> index_;
};

void add_collectives(FamilyBuilder& b, const MetricsSnapshot& s,
                     const std::vector<ClientMetric::Label>& id) {
  const CommMetrics& m = *s.counters;
  auto with = [&](std::initializer_list<ClientMetric::Label> more) {
    std::vector<ClientMetric::Label> l = id;
    l.insert(l.end(), more);
    return l;
  };
  const std::string transport = transport_class(s.transport);
  for (int k = 0; k < kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    if (kind == OpKind::send || kind == OpKind::recv) continue;
    const CommMetrics::Collective& c = m.collectives[static_cast<size_t>(k)];
    uint64_t calls = 0;
    for (int a = 0; a < kAlgorithmCount; ++a) {
      const uint64_t n = c.calls[static_cast<size_t>(a)].get();
      if (n == 0) continue;
      calls += n;
      b.counter("weft_collectives_total", "Collective operations run, by the algorithm that ran",
                with({{"op", to_string(kind)}, {"algorithm", to_string(static_cast<Algorithm>(a))}}),
                double(n));
    }
    if (calls == 0) continue;
    b.counter("weft_collective_bytes_total",
              "Bytes of this rank's collective calls (the size the algorithm selector uses), by transport",
              with({{"op", to_string(kind)}, {"transport", transport}}), double(c.bytes.get()));
    ClientMetric& h = b.add("weft_collective_duration_seconds",
                            "Time from an operation's start to its end on this rank",
                            MetricType::Histogram, with({{"op", to_string(kind)}}));
    uint64_t cumulative = 0;
    for (int i = 0; i < kDurationBuckets; ++i) {
      cumulative += c.buckets[static_cast<size_t>(i)].get();
      const double bound = i + 1 < kDurationBuckets ? duration_bucket_bound(i)
                                                   : std::numeric_limits<double>::infinity();
      h.histogram.bucket.push_back({cumulative, bound});
    }
    // The count is the +Inf bucket's, so the two agree even when a scrape races an operation.
    h.histogram.sample_count = cumulative;
    h.histogram.sample_sum = double(c.duration_ns.get()) * 1e-9;
  }
  const char* p2p_names[2] = {"send", "recv"};
  for (size_t i = 0; i < 2; ++i) {
    if (m.p2p_calls[i].get() == 0) continue;
    b.counter("weft_p2p_operations_total", "Point-to-point operations posted",
              with({{"op", p2p_names[i]}}), double(m.p2p_calls[i].get()));
    b.counter("weft_p2p_bytes_total", "Bytes of the point-to-point operations posted",
              with({{"op", p2p_names[i]}, {"transport", transport}}), double(m.p2p_bytes[i].get()));
  }
}

void add_health(FamilyBuilder& b, const MetricsSnapshot& s,
                const std::vector<ClientMetric::Label>& id) {
  const CommMetrics& m = *s.counters;
  auto with = [&](std::initializer_list<ClientMetric::Label> more) {
    std::vector<ClientMetric::Label> l = id;
    l.insert(l.end(), more);
    return l;
  };
  for (int e = 1; e < kErrorCodeCount; ++e) {
    const uint64_t n = m.errors[static_cast<size_t>(e)].load(std::memory_order_relaxed);
    if (n == 0) continue;
    b.counter("weft_operation_errors_total", "Operations that ended with an error, by code",
              with({{"code", to_string(static_cast<ErrorCode>(e))}}), double(n));
  }
  b.gauge("weft_peers_lost",
          "Peers this rank's transport declared lost (heartbeats stopped, link closed)", id,
          double(s.lost_peers));
  b.gauge("weft_communicator_broken", "1 once an error has broken the communicator", id,
          s.broken ? 1 : 0);
  b.counter("weft_revokes_total", "revoke() calls on this communicator", id,
            double(m.revokes.load(std::memory_order_relaxed)));
  b.counter("weft_shrinks_total", "shrink() calls that made a new communicator", id,
            double(m.shrinks.load(std::memory_order_relaxed)));
  b.counter("weft_grows_total", "grow() calls that made a new communicator", id,
            double(m.grows.load(std::memory_order_relaxed)));
  const TransportCounters& t = s.transport_counters;
  if (s.has_shm) {
    b.counter("weft_shm_cpu_moves_total",
              "Times this rank moved to a less crowded CPU while waiting (oversubscribed host)", id,
              double(t.cpu_moves));
    b.counter("weft_shm_single_copy_messages_total",
              "Shared-memory messages read straight from the sender's memory", id,
              double(t.single_copy_messages));
    b.counter("weft_shm_single_copy_bytes_total",
              "Bytes of shared-memory messages read straight from the sender's memory", id,
              double(t.single_copy_bytes));
  } else {
    b.gauge("weft_tcp_unexpected_bytes_peak",
            "The most eager bytes held at once before their receive was posted (TCP)", id,
            double(t.unexpected_bytes_peak));
  }
}

std::vector<MetricFamily> families_of(const std::vector<MetricsSnapshot>& snapshots) {
  FamilyBuilder b;
  b.gauge("weft_build_info", "The weft library serving these metrics (value 1)",
          {{"version", WEFT_VERSION_STRING}}, 1);
  for (const MetricsSnapshot& s : snapshots) {
    const std::vector<ClientMetric::Label> id = {{"comm", fmt::format("{:016x}", s.token)},
                                                 {"rank", std::to_string(s.rank)}};
    std::vector<ClientMetric::Label> info = id;
    info.push_back({"size", std::to_string(s.size)});
    info.push_back({"transport", transport_class(s.transport)});
    b.gauge("weft_communicator_info", "A communicator of this process (value 1)", info, 1);
    add_collectives(b, s, id);
    add_health(b, s, id);
  }
  std::vector<MetricFamily> out = b.take();
  // Families that got no sample (nothing counted yet) are left out, as the format wants.
  std::erase_if(out, [](const MetricFamily& f) { return f.metric.empty(); });
  return out;
}

// The registry and the process's endpoint. Leaf lock: mu_ is held while sources are read.
class Hub final : public prometheus::Collectable {
 public:
  uint64_t add(MetricsSource source) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    sources_.emplace(++next_, std::move(source));
    return next_;
  }
  void remove(uint64_t handle) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    sources_.erase(handle);
  }
  std::vector<MetricFamily> Collect() const EXCLUDES(mu_) override {
    MutexLock lock(mu_);
    std::vector<MetricsSnapshot> snapshots;
    snapshots.reserve(sources_.size());
    for (const auto& [handle, source] : sources_) snapshots.push_back(source());
    return families_of(snapshots);
  }

 private:
  mutable Mutex mu_;
  std::map<uint64_t, MetricsSource> sources_ GUARDED_BY(mu_);
  uint64_t next_ GUARDED_BY(mu_) = 0;
};

struct Endpoint {
  Mutex mu;
  std::shared_ptr<Hub> hub = std::make_shared<Hub>();
  std::string requested GUARDED_BY(mu);
  std::string serving GUARDED_BY(mu);
  std::unique_ptr<prometheus::Exposer> exposer GUARDED_BY(mu);
};

// Never destroyed: communicators may unregister during static destruction (a Python interpreter
// that exits with one alive), and the endpoint serves until the process ends.
Endpoint& endpoint() {
  static Endpoint* e = new Endpoint;
  return *e;
}

std::string local_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

uint64_t metrics_add_source(MetricsSource source) { return endpoint().hub->add(std::move(source)); }

void metrics_remove_source(uint64_t handle) { endpoint().hub->remove(handle); }

Result<std::string> metrics_serve(const std::string& addr) {
  Endpoint& e = endpoint();
  MutexLock lock(e.mu);
  if (e.exposer) {
    if (addr != e.requested) {
      log::info("metrics: already served on {} (asked for {} as well)", e.serving, addr);
    }
    return e.serving;
  }
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("metrics_addr \"{}\": expected HOST:PORT", addr));
  }
  std::string host = addr.substr(0, colon);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One serving thread: a scrape is small, and the ranks' CPUs are the job's.
    exposer = std::make_unique<prometheus::Exposer>(addr, 1);
  } catch (const std::exception& ex) {
    return Status(ErrorCode::io, fmt::format("cannot serve metrics on {}: {}", addr, ex.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return Status(ErrorCode::io, fmt::format("cannot serve metrics on {}: no port", addr));
  }
  exposer->RegisterCollectable(e.hub);
  if (host == "0.0.0.0" || host == "[::]" || host == "*") host = local_host_name();
  e.requested = addr;
  e.serving = fmt::format("{}:{}", host, ports.front());
  e.exposer = std::move(exposer);
  log::info("metrics: serving http://{}/metrics", e.serving);
  return e.serving;
}

std::string metrics_text(const std::vector<MetricsSnapshot>& snapshots) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families_of(snapshots));
  return out.str();
}

}  // namespace weft
