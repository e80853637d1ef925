// `weft store`: runs a standalone TCP store server in the foreground until SIGINT or SIGTERM.
// Prints "weft store listening on HOST:PORT" once bound, so scripts can read the port (useful with
// --port 0). Listens on loopback unless --host says otherwise; authenticates every request with
// the job key that WEFT_AUTH_KEY_FILE names (this command is an edge: it reads the variable).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/log.h"
#include "tools/commands.h"
#include "weft/store.h"

namespace weft::tools {
namespace {

struct StoreArgs {
  std::string host = "127.0.0.1";
  uint16_t port = 29400;
  std::string log_level = "info";
  TcpStoreConfig config;
  double idle_timeout_s = 300;
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

  TcpStoreConfig config = args.config;
  if (const char* key_file = std::getenv("WEFT_AUTH_KEY_FILE")) config.auth_key_file = key_file;
  if (args.idle_timeout_s <= 0) {
    std::fprintf(stderr, "weft store: --idle-timeout must be positive\n");
    return 2;
  }
  config.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.idle_timeout_s * 1000));
  Result<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::start(args.host, args.port, config);
  if (!server.ok()) {
    std::fprintf(stderr, "weft store: %s\n", server.status().to_string().c_str());
    return 1;
  }
  std::printf("weft store listening on %s:%u\n", args.host.empty() ? "*" : args.host.c_str(),
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
      app.add_subcommand("store", "Run a standalone weft TCP store server until SIGINT/SIGTERM");
  cmd->add_option("--host,--bind", args->host,
                  "address to listen on (\"\": every address, 0.0.0.0: every IPv4 address, "
                  "::1 or another IPv6 address)")
      ->capture_default_str();
  cmd->add_option("--max-connections", args->config.max_connections,
                  "clients served at once (also kept below the descriptor limit)")
      ->capture_default_str();
  cmd->add_option("--max-data-bytes", args->config.max_data_bytes, "bytes of keys and values held")
      ->capture_default_str();
  cmd->add_option("--max-buffered-bytes", args->config.max_buffered_bytes,
                  "bytes of requests and replies held for all clients")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", args->idle_timeout_s,
                  "seconds after which a client with nothing in flight is disconnected")
      ->capture_default_str();
  cmd->add_option("--port", args->port, "TCP port (0: let the kernel choose)")
      ->capture_default_str();
  cmd->add_option("--log-level", args->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  cmd->callback([args, &exit_code] { exit_code = run_store(*args); });
}

}  // namespace weft::tools
