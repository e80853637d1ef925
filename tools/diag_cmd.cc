// `weft diag`: "who is stuck where" for a running job, through its rendezvous store.
//
//   weft diag [--store HOST:PORT] [--wait S] [--json FILE|-]
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

#include "core/diag_report.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_keyed.h"
#include "security/job_key.h"
#include "tools/commands.h"
#include "base/socket.h"
#include "weft/store.h"

namespace weft::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct DiagArgs {
  std::string store;  // HOST:PORT; default WEFT_STORE_ADDR
  double wait_s = 5;
  std::string json;  // file, or "-" for stdout
};

struct CommInfo {
  int64_t slot = 0;
  std::string token;
  int size = 0;
  std::vector<std::optional<nlohmann::json>> records;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "weft diag: %s\n", what.c_str());
  return 1;
}

int run_diag(const DiagArgs& args) {
  std::string addr = args.store;
  if (addr.empty()) {
    const char* env = std::getenv("WEFT_STORE_ADDR");
    if (env == nullptr) {
      return fail("no store: pass --store HOST:PORT (the job's WEFT_STORE_ADDR; weft run prints "
                  "it to its ranks)");
    }
    addr = env;
  }
  Result<HostPort> where = split_host_port(addr);
  if (!where.ok()) {
    return fail("--store must be HOST:PORT or [IPV6]:PORT: \"" + addr + "\" " +
                where.status().message());
  }
  // The job's key and namespace, as its ranks have them (rendezvous/bootstrap.h).
  std::shared_ptr<const security::JobKey> key;
  if (const char* key_file = std::getenv(security::kAuthKeyFileVariable);
      key_file != nullptr && *key_file != '\0') {
    Result<security::JobKey> k = security::read_job_key_file(key_file);
    if (!k.ok()) return fail(k.status().to_string());
    key = std::make_shared<const security::JobKey>(std::move(k).value());
  }
  auto store = connect_tcp_store_with_key(where->host, where->port,
                                          std::chrono::milliseconds(5000), key);
  if (!store.ok()) return fail("cannot reach the store at " + addr + ": " + store.status().to_string());
  const char* job_id = std::getenv("WEFT_JOB_ID");
  const std::string prefix = job_namespace(job_id != nullptr ? job_id : "", key.get());
  std::shared_ptr<Store> job_store =
      prefix.empty() ? store.value() : make_prefix_store(prefix, store.value());
  Store& s = *job_store;

  auto request = s.add("weft-diag/requests", 1);
  if (!request.ok()) return fail(request.status().to_string());
  auto count = s.add("weft-diag/comms", 0);
  if (!count.ok()) return fail(count.status().to_string());
  std::vector<CommInfo> comms;
  for (int64_t k = 1; k <= count.value(); ++k) {
    auto closed = s.check({fmt::format("weft-diag/comm/{}/closed", k)});
    if (!closed.ok() || closed.value()) continue;
    auto text = s.get_string(fmt::format("weft-diag/comm/{}", k), std::chrono::milliseconds(1000));
    if (!text.ok()) continue;
    auto j = nlohmann::json::parse(text.value(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    CommInfo c;
    c.slot = k;
    c.token = j.value("token", std::string());
    c.size = j.value("size", 0);
    if (c.size <= 0 || c.size > (1 << 20) || c.token.empty()) continue;
    c.records.resize(static_cast<size_t>(c.size));
    comms.push_back(std::move(c));
  }
  if (comms.empty()) return fail("no running communicator is registered in the store at " + addr);

  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(args.wait_s * 1000));
  int answered = 0;
  while (true) {
    bool all = true;
    for (CommInfo& c : comms) {
      for (int r = 0; r < c.size; ++r) {
        auto& rec = c.records[static_cast<size_t>(r)];
        if (rec) continue;
        const std::string key =
            fmt::format("weft-diag/response/{}/{}/rank{}", request.value(), c.token, r);
        auto there = s.check({key});
        if (there.ok() && there.value()) {
          auto text = s.get_string(key, std::chrono::milliseconds(1000));
          if (text.ok()) {
            auto j = nlohmann::json::parse(text.value(), nullptr, false);
            if (!j.is_discarded() && j.is_object()) {
              rec = std::move(j);
              ++answered;
            }
          }
        }
        all = all && rec.has_value();
      }
    }
    if (all || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  nlohmann::json doc = {{"request", request.value()}, {"communicators", nlohmann::json::array()}};
  for (const CommInfo& c : comms) {
    const std::vector<std::string> lines = stuck_report(c.records);
    std::printf("communicator %s (%d ranks):\n", c.token.c_str(), c.size);
    for (const std::string& line : lines) std::printf("  %s\n", line.c_str());
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& rec : c.records) ranks.push_back(rec ? *rec : nlohmann::json());
    doc["communicators"].push_back(
        {{"token", c.token}, {"size", c.size}, {"report", lines}, {"ranks", std::move(ranks)}});
  }
  std::fflush(stdout);
  if (!args.json.empty()) {
    if (args.json == "-") {
      std::printf("%s\n", doc.dump(2).c_str());
    } else {
      std::ofstream out(args.json);
      out << doc.dump(2) << "\n";
      if (!out) return fail("cannot write " + args.json);
    }
  }
  if (answered == 0) return fail("no rank answered within " + fmt::format("{:g}", args.wait_s) + " s");
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
  cmd->callback([args, &exit_code] { exit_code = run_diag(*args); });
}

}  // namespace weft::tools
