#include "rendezvous/bootstrap.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <optional>
#include <vector>

#include "base/socket.h"
#include "security/primitives.h"
#include "rendezvous/tcp_store_keyed.h"

extern char** environ;  // NOLINT: POSIX

namespace weft {
namespace {

Status bad(std::string message) { return Status(ErrorCode::invalid_argument, std::move(message)); }

// An integer field and the variable it came from, so messages name what the user set.
struct Field {
  int value = -1;
  std::string var;
  bool set() const { return value >= 0; }
  std::string show() const { return fmt::format("{}={}", var, value); }
};

// Everything a rule decides before the WEFT_* overrides are applied.
struct Draft {
  Field rank, size, local_rank, local_size;
  std::string host;
  uint16_t port = 0;
  bool rank0_hosts = false;  // false: the launcher (or a standalone `weft store`) serves it
  std::string rule;
};

class Env {
 public:
  explicit Env(const EnvMap& env) : env_(env) {}

  // Set and not empty (an empty variable counts as unset).
  const std::string* find(const std::string& name) const {
    auto it = env_.find(name);
    return it == env_.end() || it->second.empty() ? nullptr : &it->second;
  }
  bool has(const std::string& name) const { return find(name) != nullptr; }

  // Reads name into *out when it is set; leaves *out alone otherwise.
  Status read_int(const std::string& name, int min, Field* out) const {
    const std::string* v = find(name);
    if (v == nullptr) return Status::success();
    long long x = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && x > INT_MAX)) {
      return bad(fmt::format("{}='{}' is out of range", name, *v));
    }
    if (ec != std::errc() || ptr != v->data() + v->size()) {
      return bad(fmt::format("{}='{}' is not an integer", name, *v));
    }
    if (x < min) return bad(fmt::format("{}={} must be at least {}", name, x, min));
    *out = Field{static_cast<int>(x), name};
    return Status::success();
  }

  Status require_int(const std::string& launcher, const std::string& name, int min,
                     Field* out) const {
    if (!has(name)) return bad(fmt::format("{}: {} is not set", launcher, name));
    return read_int(name, min, out);
  }

  Result<uint16_t> port(const std::string& name, const std::string& text) const {
    Field f;
    EnvMap one{{name, text}};
    WEFT_RETURN_IF_ERROR(Env(one).read_int(name, 0, &f));
    if (f.value < 1 || f.value > 65535) {
      return bad(fmt::format("{}={} is not a TCP port (1-65535)", name, f.value));
    }
    return static_cast<uint16_t>(f.value);
  }

 private:
  const EnvMap& env_;
};

// "host:port" or "[v6 address]:port".
Status parse_store_addr(const Env& env, const std::string& name, Draft* d) {
  const std::string& v = *env.find(name);
  Result<HostPort> where = split_host_port(v);
  if (!where.ok()) return bad(fmt::format("{}='{}' {}", name, v, where.status().message()));
  d->host = where->host;
  d->port = where->port;
  return Status::success();
}

// Open MPI, Slurm and torchrun-with-WEFT_STORE_ADDR: rank 0 hosts weft's store at
// WEFT_STORE_ADDR, else at MASTER_ADDR:MASTER_PORT.
Status rank0_store(const Env& env, const std::string& launcher, Draft* d) {
  d->rank0_hosts = true;
  if (env.has("WEFT_STORE_ADDR")) {
    d->rule = launcher + " (weft store at WEFT_STORE_ADDR hosted by rank 0)";
    return parse_store_addr(env, "WEFT_STORE_ADDR", d);
  }
  if (!env.has("MASTER_ADDR") || !env.has("MASTER_PORT")) {
    return bad(fmt::format(
        "{}: no store address: set WEFT_STORE_ADDR=host:port (or MASTER_ADDR and MASTER_PORT) "
        "to the host of rank 0, which serves the weft store there",
        launcher));
  }
  Result<uint16_t> port = env.port("MASTER_PORT", *env.find("MASTER_PORT"));
  if (!port.ok()) return port.status();
  d->host = *env.find("MASTER_ADDR");
  d->port = port.value();
  d->rule = launcher + " (weft store at MASTER_ADDR:MASTER_PORT hosted by rank 0)";
  return Status::success();
}

Status from_weft(const Env& env, Draft* d) {
  d->rule =
      env.has("WEFT_LOCAL_RANK") && env.has("WEFT_LOCAL_SIZE") ? "weft run" : "WEFT_* variables";
  WEFT_RETURN_IF_ERROR(env.read_int("WEFT_RANK", 0, &d->rank));
  WEFT_RETURN_IF_ERROR(env.read_int("WEFT_SIZE", 1, &d->size));
  WEFT_RETURN_IF_ERROR(env.read_int("WEFT_LOCAL_RANK", 0, &d->local_rank));
  WEFT_RETURN_IF_ERROR(env.read_int("WEFT_LOCAL_SIZE", 1, &d->local_size));
  d->rank0_hosts = false;  // `weft run` (or a standalone `weft store`) already serves it
  return parse_store_addr(env, "WEFT_STORE_ADDR", d);
}

Status from_torchrun(const Env& env, Draft* d) {
  const std::string launcher = "torchrun";
  WEFT_RETURN_IF_ERROR(env.require_int(launcher, "RANK", 0, &d->rank));
  WEFT_RETURN_IF_ERROR(env.require_int(launcher, "WORLD_SIZE", 1, &d->size));
  WEFT_RETURN_IF_ERROR(env.read_int("LOCAL_RANK", 0, &d->local_rank));
  WEFT_RETURN_IF_ERROR(env.read_int("LOCAL_WORLD_SIZE", 1, &d->local_size));
  if (env.has("WEFT_STORE_ADDR")) return rank0_store(env, launcher, d);
  if (!env.has("MASTER_ADDR")) return bad("torchrun: MASTER_ADDR is not set");
  if (!env.has("MASTER_PORT")) return bad("torchrun: MASTER_PORT is not set");
  Result<uint16_t> port = env.port("MASTER_PORT", *env.find("MASTER_PORT"));
  if (!port.ok()) return port.status();
  d->host = *env.find("MASTER_ADDR");
  d->rank0_hosts = true;
  std::string agent =
      env.has("TORCHELASTIC_USE_AGENT_STORE") ? *env.find("TORCHELASTIC_USE_AGENT_STORE") : "";
  std::transform(agent.begin(), agent.end(), agent.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (agent == "true" || agent == "1") {
    // The elastic agent already serves torch's TCPStore on MASTER_PORT.
    if (port.value() == 65535) {
      return bad("MASTER_PORT=65535: the weft store would need MASTER_PORT+1, which is not a port");
    }
    d->port = static_cast<uint16_t>(port.value() + 1);
    d->rule = "torchrun (agent store; weft store on MASTER_PORT+1 hosted by rank 0)";
  } else {
    d->port = port.value();
    d->rule = "torchrun variables without agent store (weft store on MASTER_PORT hosted by rank 0)";
  }
  return Status::success();
}

Status from_open_mpi(const Env& env, Draft* d) {
  const std::string launcher = "Open MPI";
  WEFT_RETURN_IF_ERROR(env.require_int(launcher, "OMPI_COMM_WORLD_RANK", 0, &d->rank));
  WEFT_RETURN_IF_ERROR(env.require_int(launcher, "OMPI_COMM_WORLD_SIZE", 1, &d->size));
  WEFT_RETURN_IF_ERROR(env.read_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, &d->local_rank));
  WEFT_RETURN_IF_ERROR(env.read_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, &d->local_size));
  return rank0_store(env, launcher, d);
}

Status from_slurm(const Env& env, Draft* d) {
  const std::string launcher = "Slurm";
  WEFT_RETURN_IF_ERROR(env.require_int(launcher, "SLURM_PROCID", 0, &d->rank));
  WEFT_RETURN_IF_ERROR(env.require_int(launcher, "SLURM_NTASKS", 1, &d->size));
  WEFT_RETURN_IF_ERROR(env.read_int("SLURM_LOCALID", 0, &d->local_rank));
  if (env.has("SLURM_NTASKS_PER_NODE")) {
    WEFT_RETURN_IF_ERROR(env.read_int("SLURM_NTASKS_PER_NODE", 1, &d->local_size));
  } else if (const std::string* tpn = env.find("SLURM_TASKS_PER_NODE")) {
    // "4(x2),3": tasks on the first nodes; the first number is this rule's local size.
    size_t digits = 0;
    while (digits < tpn->size() && std::isdigit(static_cast<unsigned char>((*tpn)[digits]))) {
      ++digits;
    }
    if (digits == 0) {
      return bad(fmt::format("SLURM_TASKS_PER_NODE='{}' does not start with a number", *tpn));
    }
    EnvMap first{{"SLURM_TASKS_PER_NODE", tpn->substr(0, digits)}};
    WEFT_RETURN_IF_ERROR(Env(first).read_int("SLURM_TASKS_PER_NODE", 1, &d->local_size));
  }
  return rank0_store(env, launcher, d);
}

// Applies WEFT_RANK & co. on top of whatever the launcher said.
Status apply_overrides(const Env& env, Draft* d, std::vector<std::string>* used) {
  struct Override {
    const char* var;
    int min;
    Field* field;
  };
  for (const Override& o : {Override{"WEFT_RANK", 0, &d->rank}, Override{"WEFT_SIZE", 1, &d->size},
                            Override{"WEFT_LOCAL_RANK", 0, &d->local_rank},
                            Override{"WEFT_LOCAL_SIZE", 1, &d->local_size}}) {
    if (!env.has(o.var)) continue;
    if (o.field->var != o.var) used->push_back(o.var);
    WEFT_RETURN_IF_ERROR(env.read_int(o.var, o.min, o.field));
  }
  return Status::success();
}

Status validate(const Draft& d) {
  if (d.rank.value >= d.size.value) {
    return bad(
        fmt::format("{} but {} (ranks are 0..{})", d.rank.show(), d.size.show(), d.size.value - 1));
  }
  if (d.local_rank.set() && d.local_size.set() && d.local_rank.value >= d.local_size.value) {
    return bad(fmt::format("{} but {}", d.local_rank.show(), d.local_size.show()));
  }
  if (d.local_size.set() && d.local_size.value > d.size.value) {
    return bad(fmt::format("{} but {}", d.local_size.show(), d.size.show()));
  }
  return Status::success();
}

Result<bool> parse_bool(const std::string& name, std::string v) {
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return bad(fmt::format("{}='{}' is not a boolean (use 1 or 0)", name, v));
}

}  // namespace

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

Result<LaunchInfo> detect_launch(const EnvMap& env_map) {
  Env env(env_map);
  Draft d;
  Status s;
  const bool weft_rank = env.has("WEFT_RANK"), weft_size = env.has("WEFT_SIZE"),
             weft_addr = env.has("WEFT_STORE_ADDR");
  if (weft_rank && weft_size && weft_addr) {
    s = from_weft(env, &d);
  } else if (env.has("RANK") || env.has("WORLD_SIZE") || env.has("TORCHELASTIC_USE_AGENT_STORE")) {
    s = from_torchrun(env, &d);
  } else if (env.has("OMPI_COMM_WORLD_RANK") || env.has("OMPI_COMM_WORLD_SIZE")) {
    s = from_open_mpi(env, &d);
  } else if (env.has("SLURM_PROCID")) {
    s = from_slurm(env, &d);
  } else if (weft_rank || weft_size || weft_addr) {
    std::vector<std::string> missing;
    if (!weft_rank) missing.push_back("WEFT_RANK");
    if (!weft_size) missing.push_back("WEFT_SIZE");
    if (!weft_addr) missing.push_back("WEFT_STORE_ADDR");
    return bad(
        fmt::format("incomplete WEFT_* environment: {} not set (WEFT_RANK, WEFT_SIZE and "
                    "WEFT_STORE_ADDR go together outside a launcher)",
                    fmt::join(missing, " and ")));
  } else {
    return bad(
        "no launcher environment found: set WEFT_RANK/WEFT_SIZE/WEFT_STORE_ADDR or run "
        "under weft run, torchrun, mpirun or srun");
  }
  if (!s.ok()) return s;

  std::vector<std::string> overrides;
  WEFT_RETURN_IF_ERROR(apply_overrides(env, &d, &overrides));
  WEFT_RETURN_IF_ERROR(validate(d));

  LaunchInfo info;
  info.rank = d.rank.value;
  info.size = d.size.value;
  info.local_rank = d.local_rank.value;
  info.local_size = d.local_size.value;
  info.store_host = d.host;
  info.store_port = d.port;
  info.host_store = d.rank0_hosts && info.rank == 0;
  if (const std::string* v = env.find("WEFT_HOST_STORE")) {
    Result<bool> b = parse_bool("WEFT_HOST_STORE", *v);
    if (!b.ok()) return b.status();
    info.host_store = b.value();
    overrides.push_back("WEFT_HOST_STORE");
  }
  if (const std::string* v = env.find("WEFT_HOST_ID")) info.host_id = *v;
  if (const std::string* v = env.find("WEFT_JOIN")) info.join = *v == "1";
  if (const std::string* v = env.find(security::kAuthKeyFileVariable)) info.auth_key_file = *v;
  if (const std::string* v = env.find("WEFT_JOB_ID")) {
    const bool valid = v->size() <= 64 && std::all_of(v->begin(), v->end(), [](unsigned char c) {
                         return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                       });
    if (!valid) {
      return bad(fmt::format("WEFT_JOB_ID='{}': use at most 64 letters, digits, '-', '_' or '.'",
                             *v));
    }
    info.job_id = *v;
  }
  info.rule = d.rule;
  if (!overrides.empty())
    info.rule += fmt::format("; overridden by {}", fmt::join(overrides, ", "));
  return info;
}

std::string job_namespace(const std::string& job_id, const security::JobKey* key) {
  if (!job_id.empty()) return "job/" + job_id;
  if (key == nullptr) return "";
  static constexpr std::string_view kLabel = "weft job namespace";
  security::Digest digest{};
  Status s = security::blake2s({reinterpret_cast<const uint8_t*>(kLabel.data()), kLabel.size()},
                               key->bytes(), digest);
  if (!s.ok()) return "job/unnamed";  // OpenSSL failed: still apart from keyless jobs
  std::string hex = "job/";
  for (size_t i = 0; i < 8; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

Result<std::shared_ptr<const security::JobKey>> read_launch_key(const LaunchInfo& info) {
  if (info.auth_key_file.empty()) return std::shared_ptr<const security::JobKey>();
  Result<security::JobKey> key = security::read_job_key_file(info.auth_key_file);
  if (!key.ok()) {
    return key.status().with_context(
        fmt::format("{}={}", security::kAuthKeyFileVariable, info.auth_key_file));
  }
  return std::make_shared<const security::JobKey>(std::move(key).value());
}

Result<std::shared_ptr<Store>> open_launch_store(const LaunchInfo& info,
                                                 std::chrono::milliseconds timeout,
                                                 std::unique_ptr<TcpStoreServer>* server_out,
                                                 std::shared_ptr<const security::JobKey> key) {
  const std::string who = info.rank >= 0 ? fmt::format("rank {}", info.rank) : "this process";
  if (info.store_port == 0 || (info.store_host.empty() && !info.host_store)) {
    return bad(fmt::format("{}: no store address ({})", who, info.rule));
  }
  const std::string prefix = job_namespace(info.job_id, key.get());
  auto inside = [&](std::shared_ptr<Store> store) {
    return prefix.empty() ? store : make_prefix_store(prefix, std::move(store));
  };
  if (!info.host_store) {
    Result<std::shared_ptr<Store>> store =
        connect_tcp_store_with_key(info.store_host, info.store_port, timeout, key);
    if (!store.ok()) {
      return store.status().with_context(
          fmt::format("{}: cannot reach the weft store ({})", who, info.rule));
    }
    return inside(std::move(store.value()));
  }
  if (server_out == nullptr) {
    return bad(fmt::format("{}: must host the weft store but got nowhere to keep the server", who));
  }
  // Listen on every address: store_host names this machine as the other ranks see it.
  Result<std::unique_ptr<TcpStoreServer>> server =
      start_tcp_store_server("", info.store_port, TcpStoreConfig(), key);
  if (!server.ok()) {
    return server.status().with_context(fmt::format(
        "{}: cannot host the weft store on port {} ({})", who, info.store_port, info.rule));
  }
  *server_out = std::move(server.value());
  Result<std::shared_ptr<Store>> store =
      connect_tcp_store_with_key("127.0.0.1", info.store_port, timeout, key);
  if (!store.ok()) {
    return store.status().with_context(
        fmt::format("{}: cannot reach the weft store it hosts ({})", who, info.rule));
  }
  return inside(std::move(store.value()));
}

}  // namespace weft
