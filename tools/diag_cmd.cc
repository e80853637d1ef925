// `weft diag`: "who is stuck where" for a running job, through its rendezvous store.
//
//   weft diag [--store HOST:PORT] [--wait S] [--json FILE|-]
//   weft diag --serve HOST:PORT [--store HOST:PORT]      (a live page: tools/diag/serve.h)
//
// Asks every rank of every communicator registered in the store (weft-diag/comm/<n>, written by
// each communicator's rank 0; see CommunicatorImpl::start_diag_responder) for its flight record,
// waits up to --wait seconds for the answers (ranks look once a second), and prints for each
// communicator still open the report of core/diag_report.h, e.g.
//   communicator 5f0c... (3 ranks): rank 2 has not entered allreduce #21 (f32 x 64, sum)
//   (ranks 0,1 waiting in it since 12.4 s)
// With --json the answers and the report are also written as one JSON document for tools.
// Exit code: 0 when at least one rank answered, 1 otherwise.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/commands.h"
#include "tools/diag/job_store.h"
#include "tools/diag/serve.h"

namespace weft::tools {
namespace {

struct DiagArgs {
  std::string store;  // HOST:PORT; default WEFT_STORE_ADDR
  double wait_s = 5;
  std::string json;   // file, or "-" for stdout
  std::string serve;  // HOST:PORT of the live page (tools/diag/serve.h)
};

int fail(const std::string& what) {
  std::fprintf(stderr, "weft diag: %s\n", what.c_str());
  return 1;
}

int run_diag(const DiagArgs& args) {
  if (!args.serve.empty()) return run_diag_serve(args.serve, args.store);
  auto store = connect_job_store(args.store);
  if (!store.ok()) return fail(store.status().to_string());
  auto doc = gather_diag(*store.value(),
                         std::chrono::milliseconds(static_cast<int64_t>(args.wait_s * 1000)));
  if (!doc.ok()) return fail(doc.status().to_string());
  for (const auto& c : (*doc)["communicators"]) {
    std::printf("communicator %s (%d ranks):\n", c["token"].get<std::string>().c_str(),
                c["size"].get<int>());
    for (const auto& line : c["report"]) std::printf("  %s\n", line.get<std::string>().c_str());
  }
  std::fflush(stdout);
  if (!args.json.empty()) {
    if (args.json == "-") {
      std::printf("%s\n", doc->dump(2).c_str());
    } else {
      std::ofstream out(args.json);
      out << doc->dump(2) << "\n";
      if (!out) return fail("cannot write " + args.json);
    }
  }
  if ((*doc)["answered"].get<int>() == 0) {
    return fail("no rank answered within " + fmt::format("{:g}", args.wait_s) + " s");
  }
  return 0;
}

}  // namespace

void add_diag_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<DiagArgs>();
  auto* cmd = app.add_subcommand(
      "diag", "Report which ranks of a running job are behind and where they are stuck");
  cmd->add_option("--store", args->store,
                  "HOST:PORT of the job's rendezvous store (default: $WEFT_STORE_ADDR)");
  cmd->add_option("--wait", args->wait_s, "Seconds to wait for the ranks' answers")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--json", args->json,
                  "Also write the ranks' flight records and the report as JSON to FILE (- : stdout)");
  cmd->add_option("--serve", args->serve,
                  "Serve a live page of the job at HOST:PORT (port 0: any) with its state every "
                  "second over a WebSocket, and commands (dump flight records, log level)")
      ->type_name("HOST:PORT");
  cmd->callback([args, &exit_code] { exit_code = run_diag(*args); });
}

}  // namespace weft::tools
