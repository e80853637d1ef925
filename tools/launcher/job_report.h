// What `weft run` says about a job: the line printed when the job starts ending, and one
// summary line per rank at the end ("rank 2: killed by signal 9 (SIGKILL)", "rank 0: exit 0",
// "rank 1: terminated by launcher after rank 2 failed: killed by signal 15 (SIGTERM)").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/launcher/rank_process.h"

namespace weft::launcher {

// ps_shard_failed: a parameter-server shard of `weft run --ps N` exited while the ranks ran.
enum class EndCause { none, rank_failed, timeout, signal, start_failed, ps_shard_failed };

struct JobEnd {
  EndCause cause = EndCause::none;
  int detail = 0;  // rank_failed: the rank; ps_shard_failed: the shard; signal: the signal number
  std::chrono::milliseconds timeout{0};
};

struct RankOutcome {
  bool started = false;
  std::optional<ExitInfo> exit;      // set once reaped
  bool stopped_by_launcher = false;  // the launcher signalled it while it still ran
  uint64_t signals_sent = 0;         // bit s: the launcher sent signal s
  // Stopped by the launcher, and not killed by a signal the launcher did not send (a rank that
  // died of its own SIGKILL while the launcher was sending SIGTERM ended on its own).
  bool ended_by_launcher() const {
    if (!stopped_by_launcher) return false;
    if (!exit || !exit->signaled) return true;
    return exit->signal > 0 && exit->signal < 64 && (signals_sent >> exit->signal & 1) != 0;
  }
};

// "rank 2 failed (exit 3); terminating 3 other ranks", "timed out after 5 s; terminating all 4
// ranks" ... `failure` is how the failed rank ended (rank_failed only).
std::string describe_end(const JobEnd& end, size_t ranks, int stopped,
                         const std::string& failure = "");
// One line per rank, each prefixed "weft run: ".
std::string format_summary(const std::vector<RankOutcome>& outcomes, const JobEnd& end);

}  // namespace weft::launcher
