#include "tools/launcher/metrics_targets.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

namespace weft::launcher {

Result<std::unique_ptr<MetricsTargets>> MetricsTargets::start(std::string file, int nranks,
                                                              std::shared_ptr<Store> store) {
  std::unique_ptr<MetricsTargets> t(new MetricsTargets(std::move(file), nranks, std::move(store)));
  WEFT_RETURN_IF_ERROR(t->write(render({})));
  t->thread_ = std::thread([p = t.get()] { p->loop(); });
  return t;
}

MetricsTargets::MetricsTargets(std::string file, int nranks, std::shared_ptr<Store> store)
    : file_(std::move(file)), nranks_(nranks), store_(std::move(store)) {}

MetricsTargets::~MetricsTargets() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  (void)write(render({}));
}

std::string MetricsTargets::render(const std::vector<std::string>& endpoints) {
  // Ranks that are threads of one process share its endpoint: one group per endpoint.
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < endpoints.size(); ++r) {
    if (!endpoints[r].empty()) ranks_of[endpoints[r]].push_back(static_cast<int>(r));
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [endpoint, ranks] : ranks_of) {
    std::string label;
    for (int r : ranks) label += (label.empty() ? "" : ",") + std::to_string(r);
    groups.push_back({{"targets", {endpoint}}, {"labels", {{"weft_rank", label}}}});
  }
  return groups.dump(2) + "\n";
}

Status MetricsTargets::write(const std::string& json) const {
  const std::string tmp = file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
    out.close();
    if (!out) {
      return Status(ErrorCode::io, "--metrics-sd: cannot write " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), file_.c_str()) != 0) {
    return Status(ErrorCode::io, "--metrics-sd: cannot rename " + tmp + " to " + file_);
  }
  return Status();
}

void MetricsTargets::loop() {
  std::vector<std::string> endpoints(static_cast<size_t>(nranks_));
  std::string written = render({});
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    for (int r = 0; r < nranks_; ++r) {
      const std::string key = "weft-metrics/rank" + std::to_string(r);
      auto have = store_->check({key});
      if (!have.ok() || !have.value()) continue;
      auto value = store_->get_string(key, std::chrono::milliseconds(1000));
      if (value.ok()) endpoints[static_cast<size_t>(r)] = value.value();
    }
    const std::string json = render(endpoints);
    if (json != written) {
      Status st = write(json);
      if (st.ok()) {
        written = json;
      } else {
        std::fprintf(stderr, "weft run: %s\n", st.to_string().c_str());
      }
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; });
  }
}

}  // namespace weft::launcher
