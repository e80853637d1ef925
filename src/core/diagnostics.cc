// CommunicatorImpl's diagnostics: the watchdog (heartbeats), the `weft diag` responder, the
// explanation of a timeout (who is behind) and the flight-record dump after a failure.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/log.h"
#include "core/communicator_impl.h"
#include "core/diag_report.h"

namespace weft {

void CommunicatorImpl::start_watchdog() {
  if (options_.peer_timeout.count() <= 0 || size() < 2) return;
  watchdog_ = std::jthread([this] { watchdog_loop(); });
}

void CommunicatorImpl::stop_watchdog() {
  {
    MutexLock lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (diag_.joinable()) diag_.join();
  if (diag_slot_ > 0) {
    (void)root_store_->set(fmt::format("weft-diag/comm/{}/closed", diag_slot_), "1");
    diag_slot_ = 0;
  }
}

void CommunicatorImpl::start_diag_responder() {
  // Best effort: diagnosis must never make a communicator fail.
  auto seen = root_store_->add("weft-diag/requests", 0);
  if (!seen.ok()) return;
  diag_seen_ = seen.value();
  auto commands = root_store_->add("weft-diag/commands", 0);
  if (!commands.ok()) return;
  commands_seen_ = commands.value();
  if (rank() == 0) {
    auto slot = root_store_->add("weft-diag/comms", 1);
    if (slot.ok()) {
      nlohmann::json entry = {{"token", fmt::format("{:016x}", token_)}, {"size", size()}};
      if (root_store_->set(fmt::format("weft-diag/comm/{}", slot.value()), entry.dump()).ok()) {
        diag_slot_ = slot.value();
      }
    }
  }
  diag_ = std::jthread([this] { diag_loop(); });
}

void CommunicatorImpl::diag_loop() {
  MutexUniqueLock lock(watch_mu_);
  while (!watch_cv_.wait_for(lock.native(), std::chrono::seconds(1),
                             [&]() REQUIRES(watch_mu_) { return watch_stop_; })) {
    lock.unlock();
    // get() with no wait: bounded (about 250 ms to connect) even when the store is gone, e.g.
    // hosted by a rank that already exited, so shutting down never waits long for this thread.
    auto text = root_store_->get_string("weft-diag/requests", std::chrono::milliseconds(0));
    int64_t requests = 0;
    if (text.ok()) {
      auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), requests);
      if (ec != std::errc()) requests = 0;
    }
    if (requests > diag_seen_) {
      diag_seen_ = requests;
      // The flight record, and the metrics in brief for `weft diag --serve`.
      nlohmann::json answer = nlohmann::json::parse(flight_record_json(), nullptr, false);
      if (answer.is_object() && options_.metrics) answer["metrics"] = metrics_summary();
      (void)root_store_->set(
          fmt::format("weft-diag/response/{}/{:016x}/rank{}", diag_seen_, token_, rank()),
          answer.dump());
    }
    run_diag_commands();
    lock.lock();
  }
}

void CommunicatorImpl::run_diag_commands() {
  auto text = root_store_->get_string("weft-diag/commands", std::chrono::milliseconds(0));
  if (!text.ok()) return;
  int64_t commands = 0;
  auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), commands);
  if (ec != std::errc()) return;
  // At most a few per second: the counter is the tool's, and a hostile one must not keep this
  // thread from the next request.
  for (int budget = 8; commands_seen_ < commands && budget > 0; --budget) {
    const int64_t k = ++commands_seen_;
    // The tool sets the command just before it counts it; another tool may count first.
    auto body = root_store_->get_string(fmt::format("weft-diag/command/{}", k),
                                        std::chrono::milliseconds(500));
    nlohmann::json result;
    if (!body.ok()) {
      result = {{"ok", false}, {"error", "command not found in the store"}};
    } else {
      auto command = nlohmann::json::parse(body.value(), nullptr, false);
      result = command.is_object()
                   ? run_diag_command(command)
                   : nlohmann::json{{"ok", false}, {"error", "command is not a JSON object"}};
    }
    if (result.is_null()) continue;  // not for this rank
    (void)root_store_->set(
        fmt::format("weft-diag/command/{}/result/{:016x}/rank{}", k, token_, rank()),
        result.dump());
  }
}

nlohmann::json CommunicatorImpl::run_diag_command(const nlohmann::json& command) {
  const std::string cmd = command.value("cmd", std::string());
  if (cmd == "dump") {
    if (options_.diag_dir.empty()) {
      return {{"ok", false}, {"error", fmt::format("rank {}: no diag_dir (WEFT_DIAG_DIR)", rank())}};
    }
    std::error_code ec;
    std::filesystem::create_directories(options_.diag_dir, ec);
    const auto path = std::filesystem::path(options_.diag_dir) /
                      fmt::format("weft-flight-rank{}-pid{}-{:016x}.json", rank(), ::getpid(), token_);
    std::ofstream out(path);
    out << flight_record_json() << "\n";
    out.close();
    if (!out) return {{"ok", false}, {"error", fmt::format("cannot write {}", path.string())}};
    return {{"ok", true}, {"path", path.string()}};
  }
  if (cmd == "log_level") {
    // Rank R of the communicator named by "comm", or of the job's own communicator.
    const bool mine = command.contains("comm")
                          ? command["comm"] == fmt::format("{:016x}", token_)
                          : root_store_.get() == store_.get();
    if (!mine || !command.contains("rank") || !command["rank"].is_number_integer() ||
        command["rank"].get<int64_t>() != rank()) {
      return nullptr;
    }
    const std::string level = command.value("level", std::string());
    if (!log::set_level(level)) {
      return {{"ok", false}, {"error", fmt::format("unknown log level \"{}\"", level)}};
    }
    log::warn("rank {}: log level set to {} by weft diag", rank(), level);
    return {{"ok", true}, {"level", level}};
  }
  return {{"ok", false}, {"error", fmt::format("unknown command \"{}\"", cmd)}};
}

void CommunicatorImpl::watchdog_loop() {
  const auto period = std::clamp<std::chrono::milliseconds>(
      options_.peer_timeout / 5, std::chrono::milliseconds(10), std::chrono::milliseconds(2000));
  MutexUniqueLock lock(watch_mu_);
  while (!watch_cv_.wait_for(lock.native(), period,
                             [&]() REQUIRES(watch_mu_) { return watch_stop_; })) {
    lock.unlock();
    if (broken().ok()) {
      Status st = transport_->heartbeat(Clock::now(), options_.peer_timeout);
      if (!st.ok()) {
        const bool first = broken().ok();
        set_broken(st);
        if (first) dump_flight_record(st);
      }
    }
    lock.lock();
  }
}

Status CommunicatorImpl::explain_timeout(const Status& st, const Fingerprint& fp) {
  if (size() < 2) return st;
  // One key per rank and communicator; each rank writes it at most once (its first failure).
  auto key = [&](int r) { return fmt::format("weft-diag/{:x}/rank{}", token_, r); };
  const double waited = std::chrono::duration<double>(options_.timeout).count();
  nlohmann::json mine = {{"seq", fp.seq}, {"op", fp.describe()}, {"waited_s", waited}};
  if (!store_->set(key(rank()), mine.dump()).ok()) return st;
  // The other ranks that wait in the same collective time out at about the same moment.
  const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(
                                           options_.timeout, std::chrono::milliseconds(2000));
  std::vector<std::optional<nlohmann::json>> reports(static_cast<size_t>(size()));
  while (true) {
    bool all = true;
    for (int r = 0; r < size(); ++r) {
      auto& rep = reports[static_cast<size_t>(r)];
      if (rep) continue;
      auto have = store_->check({key(r)});
      if (have.ok() && have.value()) {
        auto text = store_->get_string(key(r), std::chrono::milliseconds(100));
        if (text.ok()) {
          auto j = nlohmann::json::parse(text.value(), nullptr, false);
          if (!j.is_discarded() && j.contains("seq")) rep = std::move(j);
        }
      }
      all = all && rep.has_value();
    }
    if (all || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int> waiting, silent;
  std::string elsewhere;
  for (int r = 0; r < size(); ++r) {
    const auto& rep = reports[static_cast<size_t>(r)];
    if (!rep) {
      silent.push_back(r);
    } else if (rep->value("seq", uint64_t{0}) == fp.seq) {
      waiting.push_back(r);
    } else {
      elsewhere += fmt::format("; rank {} is stuck in {}", r, rep->value("op", std::string("?")));
    }
  }
  std::string text;
  if (!silent.empty()) {
    text =
        fmt::format("; {} {} not entered {} or {} not responding ({} waiting in it since {:.1f} s)",
                    ranks_phrase(silent), silent.size() == 1 ? "has" : "have", fp.describe(),
                    silent.size() == 1 ? "is" : "are", ranks_phrase(waiting), waited);
  } else if (elsewhere.empty()) {
    text = fmt::format("; every rank is waiting in {}", fp.describe());
  }
  text += elsewhere;
  log::warn("rank {}: {}", rank(), text.substr(2));
  return Status(st.code(), st.message() + text);
}

void CommunicatorImpl::dump_flight_record(const Status& why) {
  log::warn("rank {}: in flight after the failure: {}", rank(), recorder_->pending_summary());
  if (options_.diag_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(options_.diag_dir, ec);
  const auto path = std::filesystem::path(options_.diag_dir) /
                    fmt::format("weft-flight-rank{}-pid{}.json", rank(), ::getpid());
  std::ofstream out(path);
  out << flight_record_json() << "\n";
  if (out) {
    log::warn("rank {}: flight record written to {} ({})", rank(), path.string(),
              to_string(why.code()));
  } else {
    log::warn("rank {}: could not write the flight record to {}", rank(), path.string());
  }
}

std::string CommunicatorImpl::flight_record_json() const {
  std::vector<std::pair<std::string, uint64_t>> counters;
  MutexUniqueLock lock(transport_mu_);
  if (transport_ && transport_has_shm_) {
    const TransportCounters c = transport_->counters();
    counters = {{"shm_single_copy_messages", c.single_copy_messages},
                {"shm_single_copy_bytes", c.single_copy_bytes},
                {"shm_single_copy_refused_peers", c.single_copy_refused},
                {"shm_cpu_moves", c.cpu_moves}};
  } else if (transport_) {
    counters = {{"tcp_unexpected_bytes_peak", transport_->counters().unexpected_bytes_peak}};
  }
  lock.unlock();
  return recorder_->to_json(rank(), size(), transport_name_, counters);
}

}  // namespace weft
