// Options::apply and Options::apply_json: one setting by its environment name or JSON key, the
// syntax of sizes and durations, and "did you mean" suggestions for unknown names.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/options_env.h"
#include "weft/options.h"

namespace weft {
namespace {

// Read by the launcher, the bootstrap or the scripts; present in ranks' environments, never
// options.
constexpr std::string_view kLauncherVariables[] = {
    "WEFT_CONFIG",          "WEFT_STORE_ADDR",         "WEFT_LOCAL_RANK",
    "WEFT_LOCAL_SIZE",      "WEFT_HOST_STORE",         "WEFT_DEMO_RANKS",
    "WEFT_SKIP_SANITIZERS", "WEFT_SKIP_THREAD_SAFETY", "WEFT_JOIN",
    "WEFT_AUTH_KEY_FILE",   "WEFT_JOB_ID"};
constexpr std::string_view kSizeUnits = "(units: K/KiB, M/MiB, G/GiB, powers of 1024)";

Status invalid(std::string message) {
  return Status(ErrorCode::invalid_argument, std::move(message));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// ---- value syntax ------------------------------------------------------------------------------

Result<int> parse_int(std::string_view v) {
  v = trim(v);
  int n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    return invalid("not an integer");
  return n;
}

// "1", "true", "on", "yes" / "0", "false", "off", "no" (case-insensitive).
Result<bool> parse_bool(std::string_view v) {
  const std::string s = lower(trim(v));
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  return invalid("not a switch (on/off, true/false, 1/0, yes/no)");
}

// "65536", "512K", "512KiB", "4M", "1GiB" (case-insensitive units, powers of 1024).
Result<size_t> parse_size(std::string_view v) {
  v = trim(v);
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (end == v.data() || ec != std::errc())
    return invalid(fmt::format("not a size {}", kSizeUnits));
  const std::string unit = lower(trim(v.substr(static_cast<size_t>(end - v.data()))));
  uint64_t mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  if (unit == "k" || unit == "ki" || unit == "kib") mult = uint64_t{1} << 10;
  if (unit == "m" || unit == "mi" || unit == "mib") mult = uint64_t{1} << 20;
  if (unit == "g" || unit == "gi" || unit == "gib") mult = uint64_t{1} << 30;
  if (mult == 0) return invalid(fmt::format("unknown size unit \"{}\" {}", unit, kSizeUnits));
  if (n > SIZE_MAX / mult) return invalid("size too large");
  return static_cast<size_t>(n * mult);
}

// "30s", "500ms", "2m", "1h", "1.5s"; a plain number is seconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view v) {
  v = trim(v);
  double n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  const std::string_view what = "not a duration (e.g. 30s, 500ms, 2m, or a number of seconds)";
  if (end == v.data() || ec != std::errc()) return invalid(std::string(what));
  const std::string unit = lower(trim(v.substr(static_cast<size_t>(end - v.data()))));
  double ms_per_unit = 0;
  if (unit.empty() || unit == "s") ms_per_unit = 1000;
  if (unit == "ms") ms_per_unit = 1;
  if (unit == "m" || unit == "min") ms_per_unit = 60'000;
  if (unit == "h") ms_per_unit = 3'600'000;
  if (ms_per_unit == 0) return invalid(std::string(what));
  const double ms = n * ms_per_unit;
  if (!std::isfinite(n) || ms < 0) return invalid("duration out of range");
  // Longer than kMaxOptionDuration (a year) means "practically never": clamped, so that a
  // deadline of now + duration cannot overflow (9300000000 s once wrapped to 1 ms).
  if (ms >= static_cast<double>(kMaxOptionDuration.count())) return kMaxOptionDuration;
  return std::chrono::milliseconds(std::llround(ms));
}

template <typename T, typename F>
Status assign(Result<T> r, F&& store) {
  if (!r.ok()) return r.status();
  store(std::move(r.value()));
  return Status::success();
}

// ---- the settings ------------------------------------------------------------------------------

struct Setting {
  std::string_view env;
  std::string_view json;
  Status (*set)(Options&, std::string_view);
};

const Setting kSettings[] = {
    {"WEFT_RANK", "rank",
     [](Options& o, std::string_view v) {
       return assign(parse_int(v), [&](int n) { o.rank = n; });
     }},
    {"WEFT_SIZE", "size",
     [](Options& o, std::string_view v) {
       return assign(parse_int(v), [&](int n) { o.size = n; });
     }},
    {"WEFT_TRANSPORT", "transport",
     [](Options& o, std::string_view v) {
       const std::string s = lower(trim(v));
       if (s == "auto" || s == "automatic")
         o.transport = TransportKind::automatic;
       else if (s == "tcp")
         o.transport = TransportKind::tcp;
       else if (s == "shm")
         o.transport = TransportKind::shm;
       else
         return invalid("unknown transport (choose one of: auto, tcp, shm)");
       return Status::success();
     }},
    {"WEFT_SECURITY", "security",
     [](Options& o, std::string_view v) {
       const std::string s = lower(trim(v));
       if (s == "auto" || s == "automatic")
         o.security = Security::automatic;
       else if (s == "off")
         o.security = Security::off;
       else if (s == "auth")
         o.security = Security::auth;
       else if (s == "encrypt")
         o.security = Security::encrypt;
       else
         return invalid("unknown security mode (choose one of: auto, off, auth, encrypt)");
       return Status::success();
     }},
    {"WEFT_CHUNK_BYTES", "chunk_bytes",
     [](Options& o, std::string_view v) {
       return assign(parse_size(v), [&](size_t n) { o.chunk_bytes = n; });
     }},
    {"WEFT_SOCKETS_PER_PEER", "sockets_per_peer",
     [](Options& o, std::string_view v) {
       return assign(parse_int(v), [&](int n) { o.sockets_per_peer = n; });
     }},
    {"WEFT_EAGER_THRESHOLD", "eager_threshold",
     [](Options& o, std::string_view v) {
       return assign(parse_size(v), [&](size_t n) { o.eager_threshold = n; });
     }},
    {"WEFT_SHM_RING_BYTES", "shm_ring_bytes",
     [](Options& o, std::string_view v) {
       return assign(parse_size(v), [&](size_t n) { o.shm_ring_bytes = n; });
     }},
    {"WEFT_SHM_CMA_THRESHOLD", "shm_cma_threshold",
     [](Options& o, std::string_view v) {
       return assign(parse_size(v), [&](size_t n) { o.shm_cma_threshold = n; });
     }},
    {"WEFT_EAGER_CREDIT_BYTES", "eager_credit_bytes",
     [](Options& o, std::string_view v) {
       return assign(parse_size(v), [&](size_t n) { o.eager_credit_bytes = n; });
     }},
    {"WEFT_REACTOR_THREADS", "reactor_threads",
     [](Options& o, std::string_view v) {
       return assign(parse_int(v), [&](int n) { o.reactor_threads = n; });
     }},
    {"WEFT_IFACE", "interface",
     [](Options& o, std::string_view v) {
       o.interface = std::string(trim(v));
       return Status::success();
     }},
    {"WEFT_HOST_ID", "host_id",
     [](Options& o, std::string_view v) {
       o.host_id = std::string(trim(v));
       return Status::success();
     }},
    {"WEFT_TIMEOUT", "timeout",
     [](Options& o, std::string_view v) {
       return assign(parse_duration(v), [&](std::chrono::milliseconds d) { o.timeout = d; });
     }},
    {"WEFT_CONNECT_TIMEOUT", "connect_timeout",
     [](Options& o, std::string_view v) {
       return assign(parse_duration(v),
                     [&](std::chrono::milliseconds d) { o.connect_timeout = d; });
     }},
    {"WEFT_PEER_TIMEOUT", "peer_timeout",
     [](Options& o, std::string_view v) {
       return assign(parse_duration(v), [&](std::chrono::milliseconds d) { o.peer_timeout = d; });
     }},
    {"WEFT_FLIGHT_RECORDER", "flight_recorder",
     [](Options& o, std::string_view v) {
       return assign(parse_size(v), [&](size_t n) { o.flight_recorder = n; });
     }},
    {"WEFT_DIAG_DIR", "diag_dir",
     [](Options& o, std::string_view v) {
       o.diag_dir = std::string(trim(v));
       return Status::success();
     }},
    {"WEFT_METRICS", "metrics",
     [](Options& o, std::string_view v) {
       return assign(parse_bool(v), [&](bool b) { o.metrics = b; });
     }},
    {"WEFT_METRICS_ADDR", "metrics_addr",
     [](Options& o, std::string_view v) {
       const std::string_view addr = trim(v);
       if (!addr.empty()) WEFT_RETURN_IF_ERROR(check_host_port("metrics_addr", addr));
       o.metrics_addr = std::string(addr);
       return Status::success();
     }},
    {"WEFT_LOG_LEVEL", "log_level",
     [](Options& o, std::string_view v) {
       const std::string s = lower(trim(v));
       if (!is_log_level(s)) {
         return invalid("unknown log level (choose one of: trace, debug, info, warn, error, off)");
       }
       o.log_level = s;
       return Status::success();
     }},
};

// WEFT_ALGO_ALLREDUCE or algorithms.allreduce -> allreduce.
std::optional<OpKind> algorithm_key(std::string_view key) {
  std::optional<OpKind> kind;
  if (key.starts_with("WEFT_ALGO_")) kind = parse_op_kind(lower(key.substr(10)));
  if (key.starts_with("algorithms.")) kind = parse_op_kind(key.substr(11));
  if (kind && !takes_algorithm(*kind)) kind.reset();
  return kind;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

Status unknown_key(std::string_view key) {
  const bool env = key.starts_with("WEFT_");
  std::vector<std::string> known = env ? option_env_names() : option_json_keys();
  if (env) known.insert(known.end(), std::begin(kLauncherVariables), std::end(kLauncherVariables));
  // A known name that contains what was typed ("sockets" -> "sockets_per_peer") wins over one
  // that is merely a few edits away.
  auto score = [&](const std::string& name) {
    return name.find(key) != std::string::npos ? 0 : edit_distance(key, name);
  };
  const auto closest =
      std::min_element(known.begin(), known.end(),
                       [&](const auto& x, const auto& y) { return score(x) < score(y); });
  return Status(ErrorCode::not_found, fmt::format("unknown {} \"{}\" (did you mean {}?)",
                                                  env ? "variable" : "key", key, *closest));
}

Status apply_setting(Options& o, std::string_view key, std::string_view value) {
  for (const Setting& s : kSettings) {
    if (key == s.env || key == s.json) return s.set(o, value);
  }
  if (std::optional<OpKind> kind = algorithm_key(key)) {
    std::optional<Algorithm> a = parse_algorithm(lower(trim(value)));
    if (!a)
      return invalid(
          fmt::format("unknown algorithm (choose one of: auto, {})", algorithm_choices(*kind)));
    WEFT_RETURN_IF_ERROR(check_algorithm(*kind, *a));
    o.set_algorithm(*kind, *a);
    return Status::success();
  }
  return unknown_key(key);
}

// A JSON scalar as the text apply() parses; numbers keep their JSON spelling.
Result<std::string> json_scalar(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return invalid(fmt::format("expects a string, a number or a boolean, not {}", v.type_name()));
}

Status apply_json_value(Options& o, const std::string& key, const nlohmann::json& v) {
  Result<std::string> text = json_scalar(v);
  if (!text.ok()) return text.status().with_context(fmt::format("key \"{}\"", key));
  return o.apply(key, text.value());
}

}  // namespace

// ---- Options -----------------------------------------------------------------------------------

Status Options::apply(std::string_view key, std::string_view value) {
  Status s = apply_setting(*this, key, value);
  if (s.ok() || s.code() == ErrorCode::not_found) return s;  // unknown keys need no value context
  return s.with_context(fmt::format("{}={}", key, value));
}

Status Options::apply_json(std::string_view json_text) {
  try {
    const nlohmann::json doc = nlohmann::json::parse(json_text.begin(), json_text.end());
    if (!doc.is_object()) return invalid("the top level must be a JSON object");
    Options next = *this;  // all or nothing
    for (const auto& [key, value] : doc.items()) {
      if (key != "algorithms") {
        WEFT_RETURN_IF_ERROR(apply_json_value(next, key, value));
        continue;
      }
      if (!value.is_object()) {
        return invalid("key \"algorithms\": expects an object such as {\"allreduce\": \"ring\"}");
      }
      for (const auto& [kind, algo] : value.items()) {
        WEFT_RETURN_IF_ERROR(apply_json_value(next, "algorithms." + kind, algo));
      }
    }
    *this = std::move(next);
    return Status::success();
  } catch (const nlohmann::json::exception& e) {
    return invalid(fmt::format("bad JSON: {}", e.what()));
  }
}

// ---- options_env.h -----------------------------------------------------------------------------

std::string algorithm_env_name(OpKind k) {
  std::string name = "WEFT_ALGO_";
  for (char c : std::string_view(to_string(k))) {
    name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

std::vector<std::string> option_env_names() {
  std::vector<std::string> names;
  for (const Setting& s : kSettings) names.emplace_back(s.env);
  for (int i = 0; i < kOpKindCount; ++i) {
    if (takes_algorithm(static_cast<OpKind>(i))) {
      names.push_back(algorithm_env_name(static_cast<OpKind>(i)));
    }
  }
  return names;
}

std::vector<std::string> option_json_keys() {
  std::vector<std::string> keys;
  for (const Setting& s : kSettings) keys.emplace_back(s.json);
  for (int i = 0; i < kOpKindCount; ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (takes_algorithm(kind)) keys.push_back(fmt::format("algorithms.{}", to_string(kind)));
  }
  return keys;
}

bool is_launcher_variable(std::string_view name) {
  return std::find(std::begin(kLauncherVariables), std::end(kLauncherVariables), name) !=
         std::end(kLauncherVariables);
}

}  // namespace weft
