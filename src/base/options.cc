// Options: algorithm and transport names, the algorithm x collective table, validation, the
// one-line description logged at start-up, and from_env (WEFT_CONFIG file, then WEFT_* variables).
// Setting one value by name lives in options_apply.cc.
#include "weft/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/options_env.h"

extern char** environ;  // POSIX: the process environment

namespace weft {
namespace {

constexpr std::string_view kAlgorithmNames[kAlgorithmCount] = {
    "auto",     "ring",   "recursive_doubling", "halving_doubling",
    "binomial", "direct", "pairwise",           "dissemination", "hierarchical",
    "shm_direct", "gather_merge", "dense"};
constexpr std::string_view kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};

std::string format_size(size_t n) {
  if (n != 0 && n % (size_t{1} << 30) == 0) return fmt::format("{}GiB", n >> 30);
  if (n != 0 && n % (size_t{1} << 20) == 0) return fmt::format("{}MiB", n >> 20);
  if (n != 0 && n % (size_t{1} << 10) == 0) return fmt::format("{}KiB", n >> 10);
  return std::to_string(n);
}

std::string format_duration(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? fmt::format("{}s", d.count() / 1000)
                               : fmt::format("{}ms", d.count());
}

}  // namespace

// ---- names -------------------------------------------------------------------------------------

const char* to_string(Algorithm a) {
  const auto i = static_cast<size_t>(a);
  return i < kAlgorithmCount ? kAlgorithmNames[i].data() : "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view s) {
  if (s == "automatic") return Algorithm::automatic;
  for (int i = 0; i < kAlgorithmCount; ++i) {
    if (s == kAlgorithmNames[i]) return static_cast<Algorithm>(i);
  }
  return std::nullopt;
}

const char* to_string(TransportKind t) {
  switch (t) {
    case TransportKind::automatic: return "auto";
    case TransportKind::tcp: return "tcp";
    case TransportKind::shm: return "shm";
  }
  return "?";
}

const char* to_string(Security s) {
  switch (s) {
    case Security::automatic: return "auto";
    case Security::off: return "off";
    case Security::auth: return "auth";
    case Security::encrypt: return "encrypt";
  }
  return "?";
}

bool algorithm_supports(Algorithm a, OpKind k) {
  using K = OpKind;
  auto any_of = [k](std::initializer_list<OpKind> kinds) {
    return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  };
  switch (a) {
    case Algorithm::automatic: return true;
    case Algorithm::ring:
      return any_of(
          {K::allreduce, K::allgather, K::allgatherv, K::reduce_scatter, K::broadcast, K::reduce});
    case Algorithm::recursive_doubling: return any_of({K::allreduce, K::allgather});
    case Algorithm::halving_doubling: return any_of({K::allreduce, K::reduce_scatter});
    case Algorithm::binomial:
      return any_of({K::broadcast, K::reduce, K::gather, K::scatter, K::barrier});
    case Algorithm::direct: return k != K::send && k != K::recv && k != K::sparse_allreduce;
    case Algorithm::pairwise: return any_of({K::alltoall, K::alltoallv});
    case Algorithm::dissemination: return k == K::barrier;
    case Algorithm::hierarchical:
      return any_of({K::allreduce, K::allgather, K::reduce_scatter, K::broadcast});
    case Algorithm::shm_direct:
      return k != K::send && k != K::recv && k != K::alltoallv && k != K::sparse_allreduce;
    case Algorithm::gather_merge:
    case Algorithm::dense: return k == K::sparse_allreduce;
  }
  return false;
}

// ---- internals shared with options_apply.cc (options_env.h) ----------------------------------

bool takes_algorithm(OpKind k) { return k != OpKind::send && k != OpKind::recv; }

std::string algorithm_choices(OpKind kind) {
  std::vector<std::string_view> names;
  for (int i = 1; i < kAlgorithmCount; ++i) {
    if (algorithm_supports(static_cast<Algorithm>(i), kind)) names.push_back(kAlgorithmNames[i]);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

Status check_algorithm(OpKind kind, Algorithm a) {
  if (algorithm_supports(a, kind)) return Status::success();
  return Status(ErrorCode::invalid_argument,
                fmt::format("{} does not implement {} (choose one of: {})", to_string(a),
                            to_string(kind), algorithm_choices(kind)));
}

bool is_log_level(std::string_view s) {
  return std::find(std::begin(kLogLevels), std::end(kLogLevels), s) != std::end(kLogLevels);
}

// ---- Options -----------------------------------------------------------------------------------

Status Options::validate() const {
  std::vector<std::string> errors;
  if (size == 0 || size < -1) errors.push_back(fmt::format("size={}: must be at least 1", size));
  if (rank < -1) errors.push_back(fmt::format("rank={}: must not be negative", rank));
  if (rank >= 0 && size > 0 && rank >= size) {
    errors.push_back(fmt::format("rank={}: must be below size={}", rank, size));
  }
  if (chunk_bytes < 4096 || chunk_bytes > kMaxChunkBytes) {
    errors.push_back(fmt::format("chunk_bytes={}: must be from 4KiB to {}",
                                 format_size(chunk_bytes), format_size(kMaxChunkBytes)));
  }
  if (eager_credit_bytes > kMaxEagerCreditBytes) {
    errors.push_back(fmt::format("eager_credit_bytes={}: at most {}",
                                 format_size(eager_credit_bytes),
                                 format_size(kMaxEagerCreditBytes)));
  }
  if (sockets_per_peer < 1 || sockets_per_peer > 16) {
    errors.push_back(fmt::format("sockets_per_peer={}: must be 1..16", sockets_per_peer));
  }
  if (reactor_threads < 1 || reactor_threads > 16) {
    errors.push_back(fmt::format("reactor_threads={}: must be 1..16", reactor_threads));
  }
  if (timeout.count() <= 0) errors.push_back("timeout: must be positive");
  if (connect_timeout.count() <= 0) errors.push_back("connect_timeout: must be positive");
  if (peer_timeout.count() < 0 || (peer_timeout.count() > 0 && peer_timeout.count() < 50)) {
    errors.push_back("peer_timeout: 0 (off) or at least 50ms");
  }
  for (auto [name, d] : {std::pair<std::string_view, std::chrono::milliseconds>{"timeout", timeout},
                         {"connect_timeout", connect_timeout},
                         {"peer_timeout", peer_timeout}}) {
    if (d > kMaxOptionDuration) {
      errors.push_back(fmt::format("{}={} ms: at most a year ({} ms)", name, d.count(),
                                   kMaxOptionDuration.count()));
    }
  }
  if (eager_threshold > eager_credit_bytes) {
    errors.push_back(fmt::format("eager_threshold={}: must not exceed eager_credit_bytes={}",
                                 format_size(eager_threshold), format_size(eager_credit_bytes)));
  }
  if (flight_recorder > (size_t{1} << 20)) {
    errors.push_back(fmt::format("flight_recorder={}: at most 1048576 entries", flight_recorder));
  }
  if (!metrics_addr.empty()) {
    if (Status st = check_host_port("metrics_addr", metrics_addr); !st.ok()) {
      errors.push_back(st.message());
    } else if (!metrics) {
      errors.push_back("metrics_addr: set, but metrics=off (nothing to serve)");
    }
  }
  if (!is_log_level(log_level)) {
    errors.push_back(fmt::format(
        "log_level={}: choose one of: trace, debug, info, warn, error, off", log_level));
  }
  if (shm_ring_bytes < (64 << 10) || shm_ring_bytes > (size_t{1} << 30) ||
      shm_ring_bytes % 4096 != 0) {
    errors.push_back(fmt::format("shm_ring_bytes={}: must be a multiple of 4KiB from 64KiB to 1GiB",
                                 format_size(shm_ring_bytes)));
  }
  if (static_cast<int>(security) > static_cast<int>(Security::encrypt)) {
    errors.push_back("security: unknown value");
  }
  if (static_cast<int>(transport) > static_cast<int>(TransportKind::shm)) {
    errors.push_back("transport: unknown value");
  }
  for (int i = 0; i < kOpKindCount; ++i) {
    const auto kind = static_cast<OpKind>(i);
    Status s = check_algorithm(kind, algorithm(kind));
    if (!s.ok()) {
      errors.push_back(fmt::format("{}={}: {}", algorithm_env_name(kind),
                                   to_string(algorithm(kind)), s.message()));
    }
  }
  if (errors.empty()) return Status::success();
  return Status(ErrorCode::invalid_argument,
                fmt::format("invalid options: {}", fmt::join(errors, "; ")));
}

Status check_host_port(std::string_view name, std::string_view addr) {
  const size_t colon = addr.rfind(':');
  unsigned port = 0;
  const char* end = addr.data() + addr.size();
  bool ok = colon != std::string_view::npos && colon != 0 && colon + 1 < addr.size();
  if (ok) {
    auto [p, ec] = std::from_chars(addr.data() + colon + 1, end, port);
    ok = ec == std::errc() && p == end && port <= 65535;
  }
  if (ok) return Status();
  return Status(ErrorCode::invalid_argument,
                fmt::format("{}=\"{}\": expected HOST:PORT (e.g. 127.0.0.1:0; port 0: the kernel picks)",
                            name, addr));
}

std::string Options::describe() const {
  std::string algos;
  for (int i = 0; i < kOpKindCount; ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (!takes_algorithm(kind)) continue;
    algos += fmt::format("{}{}:{}", algos.empty() ? "" : ",", to_string(kind),
                         to_string(algorithm(kind)));
  }
  return fmt::format(
      "rank={} size={} transport={} security={} algorithms={} chunk_bytes={} sockets_per_peer={} "
      "eager_threshold={} eager_credit_bytes={} reactor_threads={} shm_ring_bytes={} "
      "shm_cma_threshold={} interface=\"{}\" host_id=\"{}\" timeout={} connect_timeout={} peer_timeout={} log_level={} flight_recorder={} diag_dir=\"{}\" metrics={} metrics_addr=\"{}\"",
      rank, size, to_string(transport), to_string(security), algos, format_size(chunk_bytes), sockets_per_peer,
      format_size(eager_threshold), format_size(eager_credit_bytes), reactor_threads,
      format_size(shm_ring_bytes), format_size(shm_cma_threshold), interface,
      host_id, format_duration(timeout), format_duration(connect_timeout),
      format_duration(peer_timeout), log_level,
      flight_recorder, diag_dir, metrics ? "on" : "off", metrics_addr);
}

Result<Options> Options::from_env(const Options& base) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (kv.starts_with("WEFT_") && eq != std::string_view::npos) {
      env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  return options_from_env_map(env, base);
}

// ---- options_env.h -----------------------------------------------------------------------------

Result<Options> options_from_env_map(const std::map<std::string, std::string>& env, Options base) {
  if (auto it = env.find("WEFT_CONFIG"); it != env.end() && !it->second.empty()) {
    const std::string& path = it->second;
    std::ifstream in(path);
    if (!in) {
      return Status(ErrorCode::io,
                    fmt::format("WEFT_CONFIG={}: cannot open: {}", path, std::strerror(errno)));
    }
    std::stringstream text;
    text << in.rdbuf();
    Status s = base.apply_json(text.str());
    if (!s.ok()) return s.with_context(fmt::format("WEFT_CONFIG={}", path));
  }
  for (const auto& [name, value] : env) {
    if (!name.starts_with("WEFT_") || is_launcher_variable(name)) continue;
    WEFT_RETURN_IF_ERROR(base.apply(name, value));
  }
  WEFT_RETURN_IF_ERROR(base.validate());
  return base;
}

}  // namespace weft
