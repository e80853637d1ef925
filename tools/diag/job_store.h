// The `weft diag` side of the diagnostics protocol (keys under weft-diag/ in a job's store; the
// ranks' side is CommunicatorImpl's diag responder, src/core/diagnostics.cc).
//
//   weft-diag/comms, weft-diag/comm/<n>            communicators registered by their rank 0
//   weft-diag/requests                              counter: a new value asks every rank for its
//   weft-diag/response/<req>/<token>/rank<r>        flight record, answered here (ranks look once
//                                                   a second)
//   weft-diag/commands, weft-diag/command/<k>       counter and body of commands (dump, log_level)
//   weft-diag/command/<k>/result/<token>/rank<r>    each rank's result
//
// Everything read from the store is treated as untrusted input (sizes bounded, JSON checked).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/status.h"
#include "weft/store.h"

namespace weft::tools {

// Connects to the job's store at HOST:PORT ("" : $WEFT_STORE_ADDR) with the job key in
// $WEFT_AUTH_KEY_FILE, inside the job's namespace ($WEFT_JOB_ID), as the job's ranks do.
Result<std::shared_ptr<Store>> connect_job_store(const std::string& addr);

// Asks every rank of every open communicator for its flight record and waits up to `wait` for
// the answers. {"request", "answered" (ranks), "communicators": [{"token", "size", "report"
// (lines of core/diag_report.h), "ranks" (records, null: no answer)}]}. Error: no communicator
// is registered, or the store failed.
Result<nlohmann::json> gather_diag(Store& store, std::chrono::milliseconds wait);

// The state of a job once a second for `weft diag --serve`: every poll() reads the answers to
// the last two requests (a rank answers the newest request it sees, once a second) and asks
// again when the newest is older than a second and a half, so each rank's record is at most
// about two seconds old and no rank is missed for answering a little late. Same document as
// gather_diag; a rank with no answer to either request is null.
class DiagPoller {
 public:
  explicit DiagPoller(Store& store) : store_(store) {}
  Result<nlohmann::json> poll();

 private:
  Store& store_;
  int64_t request_ = 0;
  std::chrono::steady_clock::time_point asked_{};
};

// Sends `command` ({"cmd": "dump"} or {"cmd": "log_level", "rank": R, "level": L[, "comm"]})
// to every rank and collects the results that arrive within `wait`:
// {"command": k, "results": {"<token>/rank<r>": {...}}}.
Result<nlohmann::json> send_diag_command(Store& store, const nlohmann::json& command,
                                         std::chrono::milliseconds wait);

}  // namespace weft::tools
