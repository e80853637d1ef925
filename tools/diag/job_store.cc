#include "tools/diag/job_store.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "core/diag_report.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_keyed.h"
#include "security/job_key.h"

namespace weft::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct CommInfo {
  std::string token;
  int size = 0;
  std::vector<std::optional<nlohmann::json>> records;
};

// The open communicators registered in the store.
Result<std::vector<CommInfo>> open_communicators(Store& s) {
  auto count = s.add("weft-diag/comms", 0);
  if (!count.ok()) return count.status();
  std::vector<CommInfo> comms;
  for (int64_t k = 1; k <= count.value(); ++k) {
    auto closed = s.check({fmt::format("weft-diag/comm/{}/closed", k)});
    if (!closed.ok() || closed.value()) continue;
    auto text = s.get_string(fmt::format("weft-diag/comm/{}", k), std::chrono::milliseconds(1000));
    if (!text.ok()) continue;
    auto j = nlohmann::json::parse(text.value(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    CommInfo c;
    c.token = j.value("token", std::string());
    c.size = j.value("size", 0);
    if (c.size <= 0 || c.size > (1 << 20) || c.token.empty() || c.token.size() > 64) continue;
    c.records.resize(static_cast<size_t>(c.size));
    comms.push_back(std::move(c));
  }
  if (comms.empty()) {
    return Status(ErrorCode::not_found, "no running communicator is registered in the store");
  }
  return comms;
}

// Reads key if it exists now as a JSON value.
std::optional<nlohmann::json> read_json_now(Store& s, const std::string& key) {
  auto there = s.check({key});
  if (!there.ok() || !there.value()) return std::nullopt;
  auto text = s.get_string(key, std::chrono::milliseconds(1000));
  if (!text.ok()) return std::nullopt;
  auto j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// Fills comms[*].records from key(token, rank) until all are there or `wait` passes; returns how
// many answered.
template <typename KeyOf>
int collect(Store& s, std::vector<CommInfo>& comms, std::chrono::milliseconds wait, KeyOf key_of) {
  const auto deadline = Clock::now() + wait;
  int answered = 0;
  while (true) {
    bool all = true;
    for (CommInfo& c : comms) {
      for (int r = 0; r < c.size; ++r) {
        auto& rec = c.records[static_cast<size_t>(r)];
        if (rec) continue;
        rec = read_json_now(s, key_of(c.token, r));
        if (rec) ++answered;
        all = all && rec.has_value();
      }
    }
    if (all || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return answered;
}

// The document of gather_diag and DiagPoller::poll.
nlohmann::json state_document(int64_t request, int answered, const std::vector<CommInfo>& comms) {
  nlohmann::json doc = {{"request", request},
                        {"answered", answered},
                        {"communicators", nlohmann::json::array()}};
  for (const CommInfo& c : comms) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& rec : c.records) ranks.push_back(rec ? *rec : nlohmann::json());
    doc["communicators"].push_back({{"token", c.token},
                                    {"size", c.size},
                                    {"report", stuck_report(c.records)},
                                    {"ranks", std::move(ranks)}});
  }
  return doc;
}

}  // namespace

Result<std::shared_ptr<Store>> connect_job_store(const std::string& store_addr) {
  std::string addr = store_addr;
  if (addr.empty()) {
    const char* env = std::getenv("WEFT_STORE_ADDR");
    if (env == nullptr) {
      return Status(ErrorCode::invalid_argument,
                    "no store: pass --store HOST:PORT (the job's WEFT_STORE_ADDR; weft run "
                    "prints it to its ranks)");
    }
    addr = env;
  }
  Result<HostPort> where = split_host_port(addr);
  if (!where.ok()) {
    return Status(ErrorCode::invalid_argument, "--store must be HOST:PORT or [IPV6]:PORT: \"" +
                                                   addr + "\" " + where.status().message());
  }
  // The job's key and namespace, as its ranks have them (rendezvous/bootstrap.h).
  std::shared_ptr<const security::JobKey> key;
  if (const char* key_file = std::getenv(security::kAuthKeyFileVariable);
      key_file != nullptr && *key_file != '\0') {
    Result<security::JobKey> k = security::read_job_key_file(key_file);
    if (!k.ok()) return k.status();
    key = std::make_shared<const security::JobKey>(std::move(k).value());
  }
  auto store =
      connect_tcp_store_with_key(where->host, where->port, std::chrono::milliseconds(5000), key);
  if (!store.ok()) {
    return store.status().with_context("cannot reach the store at " + addr);
  }
  const char* job_id = std::getenv("WEFT_JOB_ID");
  const std::string prefix = job_namespace(job_id != nullptr ? job_id : "", key.get());
  if (prefix.empty()) return store.value();
  return make_prefix_store(prefix, store.value());
}

Result<nlohmann::json> gather_diag(Store& s, std::chrono::milliseconds wait) {
  auto request = s.add("weft-diag/requests", 1);
  if (!request.ok()) return request.status();
  auto comms = open_communicators(s);
  if (!comms.ok()) return comms.status();
  const int answered = collect(s, comms.value(), wait, [&](const std::string& token, int r) {
    return fmt::format("weft-diag/response/{}/{}/rank{}", request.value(), token, r);
  });
  return state_document(request.value(), answered, comms.value());
}

Result<nlohmann::json> DiagPoller::poll() {
  const auto now = Clock::now();
  if (request_ == 0 || now - asked_ >= std::chrono::milliseconds(1500)) {
    auto request = store_.add("weft-diag/requests", 1);
    if (!request.ok()) return request.status();
    request_ = request.value();
    asked_ = now;
  }
  auto comms = open_communicators(store_);
  if (!comms.ok()) return comms.status();
  int answered = 0;
  for (CommInfo& c : comms.value()) {
    for (int r = 0; r < c.size; ++r) {
      for (int64_t q = request_; q >= request_ - 1 && q > 0; --q) {
        auto rec = read_json_now(store_, fmt::format("weft-diag/response/{}/{}/rank{}", q, c.token, r));
        if (rec) {
          c.records[static_cast<size_t>(r)] = std::move(rec);
          ++answered;
          break;
        }
      }
    }
  }
  return state_document(request_, answered, comms.value());
}

Result<nlohmann::json> send_diag_command(Store& s, const nlohmann::json& command,
                                         std::chrono::milliseconds wait) {
  auto comms = open_communicators(s);
  if (!comms.ok()) return comms.status();
  auto slot = s.add("weft-diag/command-slots", 1);
  if (!slot.ok()) return slot.status();
  WEFT_RETURN_IF_ERROR(s.set(fmt::format("weft-diag/command/{}", slot.value()), command.dump()));
  auto counted = s.add("weft-diag/commands", 1);
  if (!counted.ok()) return counted.status();
  // Ranks a command is not for (log_level of another rank) do not answer: the wait ends early
  // only when every rank answered.
  collect(s, comms.value(), wait, [&](const std::string& token, int r) {
    return fmt::format("weft-diag/command/{}/result/{}/rank{}", slot.value(), token, r);
  });
  nlohmann::json results = nlohmann::json::object();
  for (const CommInfo& c : comms.value()) {
    for (int r = 0; r < c.size; ++r) {
      const auto& rec = c.records[static_cast<size_t>(r)];
      if (rec) results[fmt::format("{}/rank{}", c.token, r)] = *rec;
    }
  }
  return nlohmann::json{{"command", slot.value()}, {"results", std::move(results)}};
}

}  // namespace weft::tools
