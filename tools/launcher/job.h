// Job: the ranks of one `weft run`, from start to the last exit.
//
// run_job() hosts the rendezvous store (a TcpStoreServer on 127.0.0.1, port chosen by the
// kernel), starts one process per rank with its WEFT_* variables, relays their output line by
// line with a "[rank] " prefix, and watches them from one epoll loop (pidfds, pipes, a signalfd
// and timerfds; nothing polls on a timer). The first rank to fail, the --timeout, or a SIGINT /
// SIGTERM / SIGHUP to the launcher ends the job: every rank still running gets SIGTERM (or the
// forwarded signal), and SIGKILL once the grace period passes. With JobSpec::respawns, a failed
// rank is first replaced by a new process that joins the running job (fault-tolerant training:
// the survivors shrink, then grow when the replacement arrives).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tools/launcher/rank_layout.h"

namespace weft::launcher {

inline constexpr int kTimeoutExitCode = 124;  // as timeout(1)
inline constexpr int kSpawnFailedExitCode = 127;
inline constexpr int kLauncherErrorExitCode = 1;

struct JobSpec {
  std::vector<std::string> command;       // program and its arguments
  std::vector<RankPlacement> ranks;       // one per rank, in rank order
  std::chrono::milliseconds timeout{0};   // 0: none
  std::chrono::milliseconds grace{2000};  // SIGTERM -> SIGKILL
  bool summary_always = false;            // print the per-rank summary on success too
  // A rank that fails is restarted (same command and rank variables, plus WEFT_JOIN=1) instead
  // of ending the job, this many times in all; the others are left running.
  int respawns = 0;
  // `weft run --ps N`: N parameter-server shards (`<weft_path> ps serve --shard I --of N`),
  // started before the ranks with the job's store and key, so they publish ps/shard/<I> where
  // the ranks look (docs/parameter-server.md). Their output is relayed as "[psI] ". A shard that
  // exits while ranks run ends the job; the shards get SIGTERM once every rank has exited.
  int ps_shards = 0;
  std::string weft_path;  // the weft binary
  // Keep this file a Prometheus file_sd list of the ranks' metrics endpoints (MetricsTargets);
  // ranks get WEFT_METRICS_ADDR=127.0.0.1:0 unless the environment sets it. Empty: off.
  std::string metrics_sd;
};

// Runs the job to the end and returns the launcher's exit code: 0 when every rank exited 0;
// 124 after the timeout; 128 + signal when the launcher was signalled; otherwise the code of
// the first rank (or ps shard) that failed (128 + signal if a signal killed it). Every error is printed to
// stderr prefixed "weft run: ".
int run_job(const JobSpec& spec);

}  // namespace weft::launcher
