// `weft ps serve --shard I --of N [--host H] [--port P] [--store HOST:PORT]`: runs one shard of
// the parameter server (docs/parameter-server.md) in the foreground until SIGINT or SIGTERM.
// Binds 127.0.0.1 and a port the kernel chooses unless told otherwise, prints
// "weft ps shard I of N serving on HOST:PORT" once bound, and publishes ps/shard/<I> = HOST:PORT
// in the job's store, found as the job's ranks find it (WEFT_STORE_ADDR, MASTER_ADDR and
// MASTER_PORT, WEFT_JOB_ID, WEFT_AUTH_KEY_FILE: this command is an edge and reads them). Without
// a store it serves anyway, for clients given its address.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/log.h"
#include "ps/discovery.h"
#include "ps/server.h"
#include "tools/commands.h"

namespace weft::tools {
namespace {

struct ServeArgs {
  int shard = 0;
  int of = 1;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string store;  // HOST:PORT; default: the launcher's variables
  double store_timeout_s = 30;
  std::string log_level = "info";
};

int run_serve(const ServeArgs& args) {
  if (!log::set_level(args.log_level)) {
    std::fprintf(stderr, "weft ps serve: unknown log level '%s'\n", args.log_level.c_str());
    return 2;
  }
  if (args.of <= 0 || args.shard < 0 || args.shard >= args.of) {
    std::fprintf(stderr, "weft ps serve: --shard %d --of %d: the shard must be in [0, %d)\n",
                 args.shard, args.of, args.of);
    return 2;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before gRPC starts its threads

  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(args.store_timeout_s * 1000));
  const EnvMap env = current_environment();
  const bool want_store = !args.store.empty() || env.count("WEFT_STORE_ADDR") ||
                          (env.count("MASTER_ADDR") && env.count("MASTER_PORT"));
  ps::JobStore job;
  if (want_store) {
    Result<ps::JobStore> opened = ps::open_job_store(env, args.store, timeout);
    if (!opened.ok()) {
      std::fprintf(stderr, "weft ps serve: %s\n", opened.status().to_string().c_str());
      return 1;
    }
    job = std::move(opened.value());
  } else {
    log::warn("weft ps serve: no store (--store, WEFT_STORE_ADDR, MASTER_ADDR): serving without "
              "publishing the address");
  }
  ps::ServerOptions options;
  options.shard = args.shard;
  options.num_shards = args.of;
  options.host = args.host;
  options.port = args.port;
  options.job_token = job.token;
  Result<std::unique_ptr<ps::ShardServer>> server = ps::ShardServer::start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "weft ps serve: %s\n", server.status().to_string().c_str());
    return 1;
  }
  if (job.store) {
    Status s = ps::publish_shard(*job.store, args.shard, args.of, server.value()->address());
    if (!s.ok()) {
      std::fprintf(stderr, "weft ps serve: cannot publish the address: %s\n",
                   s.to_string().c_str());
      return 1;
    }
  }
  std::printf("weft ps shard %d of %d serving on %s\n", args.shard, args.of,
              server.value()->address().c_str());
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  log::info("weft ps serve: signal {} received, stopping", sig);
  server.value()->stop();  // every call has ended
  // Exit without destroying gRPC's server, which now and then takes 10 s (gRPC 1.51): `weft run`
  // gives its shards 2 s after SIGTERM.
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace

void add_ps_command(CLI::App& app, int& exit_code) {
  auto* ps = app.add_subcommand("ps", "The parameter server (docs/parameter-server.md)");
  ps->require_subcommand(1);
  auto args = std::make_shared<ServeArgs>();
  auto* serve = ps->add_subcommand("serve", "Run one parameter-server shard until SIGINT/SIGTERM");
  serve->add_option("--shard", args->shard, "this shard's index")->required();
  serve->add_option("--of", args->of, "number of shards")->required();
  serve->add_option("--host,--bind", args->host, "address to listen on (0.0.0.0: every IPv4 one)")
      ->capture_default_str();
  serve->add_option("--port", args->port, "TCP port (0: let the kernel choose)")
      ->capture_default_str();
  serve->add_option("--store", args->store,
                    "the job's store HOST:PORT (default: WEFT_STORE_ADDR, else MASTER_ADDR and "
                    "MASTER_PORT)");
  serve->add_option("--store-timeout", args->store_timeout_s, "seconds to wait for the store")
      ->capture_default_str();
  serve->add_option("--log-level", args->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  serve->callback([args, &exit_code] { exit_code = run_serve(*args); });
}

}  // namespace weft::tools
