#include "core/diag_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

namespace weft {

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ",", ranks[i]);
    if (j > i) out += fmt::format("{}{}", j == i + 1 ? "," : "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(ranks);
}

namespace {

// What one rank's record says about its collectives.
struct RankView {
  uint64_t entered = 0;  // highest collective sequence number it has an entry for
  uint64_t pending = 0;  // lowest sequence number of a collective it has not finished (0: none)
  std::string pending_describe;
  double waiting_s = 0;  // since it started (or queued) that collective
  std::vector<std::string> p2p;  // pending point-to-point, described
  std::string failure;           // the error of its most recent failed operation
};

double get_double(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string get_string(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

RankView view_of(const nlohmann::json& record) {
  RankView v;
  auto entries = record.find("entries");
  if (entries == record.end() || !entries->is_array()) return v;
  for (const auto& e : *entries) {
    if (!e.is_object()) continue;
    const std::string state = get_string(e, "state");
    const bool open = state == "queued" || state == "running";
    if (state == "failed") v.failure = get_string(e, "describe") + ": " + get_string(e, "error");
    auto seq_it = e.find("seq");
    if (seq_it == e.end() || !seq_it->is_number_unsigned()) {
      if (open) {
        const double since = -(state == "running" ? get_double(e, "started_s") : get_double(e, "queued_s"));
        v.p2p.push_back(fmt::format("{} ({} for {:.1f} s)", get_string(e, "describe"), state, since));
      }
      continue;
    }
    const uint64_t seq = seq_it->get<uint64_t>();
    v.entered = std::max(v.entered, seq);
    if (open && (v.pending == 0 || seq < v.pending)) {
      v.pending = seq;
      v.pending_describe = get_string(e, "describe");
      v.waiting_s = -(state == "running" ? get_double(e, "started_s") : get_double(e, "queued_s"));
    }
  }
  return v;
}

}  // namespace

std::vector<std::string> stuck_report(const std::vector<std::optional<nlohmann::json>>& records) {
  std::vector<std::string> lines;
  const int size = static_cast<int>(records.size());
  std::vector<RankView> views(records.size());
  std::vector<int> silent;
  for (int r = 0; r < size; ++r) {
    if (records[static_cast<size_t>(r)]) {
      views[static_cast<size_t>(r)] = view_of(*records[static_cast<size_t>(r)]);
    } else {
      silent.push_back(r);
    }
  }
  // The blocking collective: the lowest one some answering rank waits in.
  uint64_t blocking = 0;
  std::string blocking_describe;
  for (int r = 0; r < size; ++r) {
    const RankView& v = views[static_cast<size_t>(r)];
    if (!records[static_cast<size_t>(r)] || v.pending == 0) continue;
    if (blocking == 0 || v.pending < blocking) {
      blocking = v.pending;
      blocking_describe = v.pending_describe;
    }
  }
  if (blocking != 0) {
    std::vector<int> waiting, behind;
    double longest = 0;
    std::map<std::string, std::vector<int>> elsewhere;  // other collectives ranks wait in
    for (int r = 0; r < size; ++r) {
      const RankView& v = views[static_cast<size_t>(r)];
      if (!records[static_cast<size_t>(r)]) continue;
      if (v.pending == blocking) {
        waiting.push_back(r);
        longest = std::max(longest, v.waiting_s);
      } else if (v.entered < blocking) {
        behind.push_back(r);
      } else if (v.pending != 0) {
        elsewhere[v.pending_describe].push_back(r);
      }
    }
    std::vector<int> missing = behind;
    missing.insert(missing.end(), silent.begin(), silent.end());
    std::sort(missing.begin(), missing.end());
    if (!missing.empty()) {
      lines.push_back(fmt::format("{} {} not entered {} ({} waiting in it since {:.1f} s)",
                                  ranks_phrase(missing), missing.size() == 1 ? "has" : "have",
                                  blocking_describe, ranks_phrase(waiting), longest));
    } else {
      lines.push_back(fmt::format("every rank is in {} ({} waiting in it since {:.1f} s)",
                                  blocking_describe, ranks_phrase(waiting), longest));
    }
    for (const auto& [what, ranks] : elsewhere) {
      lines.push_back(fmt::format("{} {} stuck in {}", ranks_phrase(ranks),
                                  ranks.size() == 1 ? "is" : "are", what));
    }
  } else {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < size; ++r) {
      if (!records[static_cast<size_t>(r)]) continue;
      lo = std::min(lo, views[static_cast<size_t>(r)].entered);
      hi = std::max(hi, views[static_cast<size_t>(r)].entered);
    }
    if (hi == 0) {
      lines.push_back("no collective has run yet");
    } else if (lo == hi) {
      lines.push_back(fmt::format("no collective in flight; every answering rank finished #{}", hi));
    } else {
      lines.push_back(fmt::format("no collective in flight; the ranks finished #{} to #{}", lo, hi));
    }
  }
  if (!silent.empty()) {
    lines.push_back(fmt::format("{} did not answer (dead, stopped, or its communicator is gone)",
                                ranks_phrase(silent)));
  }
  for (int r = 0; r < size; ++r) {
    const RankView& v = views[static_cast<size_t>(r)];
    for (const std::string& p : v.p2p) lines.push_back(fmt::format("rank {} waits in {}", r, p));
    if (!v.failure.empty()) lines.push_back(fmt::format("rank {} failed: {}", r, v.failure));
  }
  return lines;
}

}  // namespace weft
