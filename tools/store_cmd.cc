// `weft store`: runs a standalone TCP store server in the foreground until SIGINT or SIGTERM.
// Prints "weft store listening on HOST:PORT" once bound, so scripts can read the port (useful with
// --port 0).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "base/log.h"
#include "tools/commands.h"
#include "weft/store.h"

namespace weft::tools {
namespace {

struct StoreArgs {
  std::string host = "0.0.0.0";
  uint16_t port = 29400;
  std::string log_level = "info";
};

int run_store(const StoreArgs& args) {
  if (!log::set_level(args.log_level)) {
    std::fprintf(stderr, "weft store: unknown log level '%s'\n", args.log_level.c_str());
    return 2;
  }
  // Block the signals before the server thread starts so it inherits the mask and only sigwait
  // below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Result<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::start(args.host, args.port);
  if (!server.ok()) {
    std::fprintf(stderr, "weft store: %s\n", server.status().to_string().c_str());
    return 1;
  }
  std::printf("weft store listening on %s:%u\n", args.host.empty() ? "0.0.0.0" : args.host.c_str(),
              static_cast<unsigned>(server.value()->port()));
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  log::info("weft store: signal {} received, stopping", sig);
  server.value().reset();
  return 0;
}

}  // namespace

void add_store_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<StoreArgs>();
  auto* cmd =
      app.add_subcommand("store", "run a standalone weft TCP store server until SIGINT/SIGTERM");
  cmd->add_option("--host", args->host, "address to listen on (\"\" or 0.0.0.0: every address)")
      ->capture_default_str();
  cmd->add_option("--port", args->port, "TCP port (0: let the kernel choose)")
      ->capture_default_str();
  cmd->add_option("--log-level", args->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  cmd->callback([args, &exit_code] { exit_code = run_store(*args); });
}

}  // namespace weft::tools
