// Internals of Options (options.cc, options_apply.cc), and its environment side separated from the
// real process environment so that tests can feed any set of variables.
//
// Options::from_env(base) is options_from_env_map(<the WEFT_* variables of this process>, base).
// Plain functions over values; any thread may call them.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "weft/options.h"

namespace weft {

// Applies the JSON file named by env["WEFT_CONFIG"] (when present), then every WEFT_* entry of
// `env` that names an option, on top of `base`, and validates. Entries that are not WEFT_* are
// ignored, as are the launcher's own variables (is_launcher_variable); any other WEFT_* name is
// an error that suggests the closest known name.
Result<Options> options_from_env_map(const std::map<std::string, std::string>& env, Options base);

// Every environment variable name Options::apply accepts, in documentation order
// (WEFT_RANK ... WEFT_LOG_LEVEL, then WEFT_ALGO_<COLLECTIVE> for each collective).
std::vector<std::string> option_env_names();
// Every JSON key Options::apply accepts ("chunk_bytes", ..., "algorithms.allreduce", ...).
std::vector<std::string> option_json_keys();

// WEFT_* variables that are not options but are read by the launcher, the bootstrap or the
// project's scripts (WEFT_CONFIG, WEFT_STORE_ADDR, WEFT_LOCAL_RANK, ...): from_env skips them.
bool is_launcher_variable(std::string_view name);

// ---- shared by options.cc and options_apply.cc ----

// The longest duration an option takes (a year): a longer one written in the environment or JSON
// means "practically never" and is clamped to it; Options::validate rejects a longer one set in
// code. Deadlines computed as now + duration in nanoseconds then never overflow.
inline constexpr std::chrono::milliseconds kMaxOptionDuration{365LL * 24 * 3600 * 1000};
// The largest chunk_bytes (ring algorithms keep two chunks of scratch per call) and
// eager_credit_bytes (what one peer may park at this rank).
inline constexpr size_t kMaxChunkBytes = size_t{256} << 20;
inline constexpr size_t kMaxEagerCreditBytes = size_t{1} << 30;

// Collectives that take a forced algorithm: every OpKind except send and recv.
bool takes_algorithm(OpKind kind);
// "WEFT_ALGO_ALLREDUCE" for OpKind::allreduce.
std::string algorithm_env_name(OpKind kind);
// The algorithms (not auto) that implement `kind`: "ring, binomial, direct".
std::string algorithm_choices(OpKind kind);
// ok when `a` implements `kind`, else "pairwise does not implement broadcast (choose one of: ...)".
Status check_algorithm(OpKind kind, Algorithm a);
// trace, debug, info, warn, error, off.
bool is_log_level(std::string_view level);
// "HOST:PORT" with a port of 0 to 65535 (metrics_addr).
Status check_host_port(std::string_view name, std::string_view addr);

}  // namespace weft
