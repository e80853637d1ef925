// `weft run`: starts N local ranks of a program with the WEFT_* rendezvous variables set.
//   weft run -n 4 [--host-ids a,a,b,b] [--timeout 60] [--ps 2] [--] ./train --epochs 3
// The launcher itself lives in tools/launcher/ (job.h describes what it does).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/launcher/job.h"
#include "tools/launcher/rank_layout.h"

namespace weft::tools {

namespace {

struct RunArgs {
  int nranks = 0;
  std::string host_id;
  std::string host_ids;
  double timeout_s = 0;
  double grace_s = 2;
  bool summary = false;
  int respawn = 0;
  int ps_shards = 0;
  std::string metrics_sd;
  std::vector<std::string> command;  // PROGRAM ARGS...
};

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

int run(const RunArgs& args) {
  auto placements = launcher::place_ranks(args.nranks, args.host_id, args.host_ids);
  if (!placements.ok()) {
    std::cerr << "weft run: " << placements.status().message() << "\n";
    return 2;
  }
  launcher::JobSpec spec;
  spec.command = args.command;
  spec.ranks = std::move(placements).value();
  spec.timeout = to_ms(args.timeout_s);
  spec.grace = to_ms(args.grace_s);
  spec.summary_always = args.summary;
  spec.respawns = args.respawn;
  spec.ps_shards = args.ps_shards;
  if (spec.ps_shards > 0) {
    // The shards are this same binary (`weft ps serve`), whatever PATH says.
    char self[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
      std::cerr << "weft run: --ps: cannot find the weft binary (/proc/self/exe)\n";
      return 1;
    }
    spec.weft_path.assign(self, static_cast<size_t>(n));
  }
  spec.metrics_sd = args.metrics_sd;
  return launcher::run_job(spec);
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Start N local ranks of PROGRAM (the weft launcher)");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("-n,--nranks", args->nranks, "Number of ranks to start")
      ->required()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--host-id", args->host_id, "WEFT_HOST_ID for every rank");
  cmd->add_option("--host-ids", args->host_ids,
                  "Comma list of one host id per rank (pretend ranks live on different hosts; "
                  "local rank and size are computed per id)");
  cmd->add_option("--timeout", args->timeout_s,
                  "Kill the job after this many seconds and exit 124 (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--grace", args->grace_s,
                  "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--respawn", args->respawn,
                  "Restart a rank that fails as a new process that joins the running job "
                  "(WEFT_JOIN=1: Communicator::from_env joins through grow()), at most this many "
                  "times; the other ranks keep running (they shrink() and grow())")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--ps", args->ps_shards,
                  "Also start this many parameter-server shards (`weft ps serve`) with the job's "
                  "store; the ranks find them with weft::ps::Client::from_env")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  cmd->add_option("--metrics-sd", args->metrics_sd,
                  "Keep FILE a Prometheus file_sd target list of the ranks' /metrics endpoints "
                  "(ranks serve on WEFT_METRICS_ADDR, default 127.0.0.1:0)")
      ->type_name("FILE");
  cmd->add_flag("--summary", args->summary, "Print the per-rank summary even when all succeed");
  cmd->add_option("command", args->command, "PROGRAM ARGS... (everything from PROGRAM on)")
      ->required();
  // The first positional argument ends weft's options: "-n 3" after PROGRAM belongs to PROGRAM.
  cmd->positionals_at_end();
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

}  // namespace weft::tools
