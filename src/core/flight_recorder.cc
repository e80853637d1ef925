#include "core/flight_recorder.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "transport/transport.h"
#include "weft/work.h"

namespace weft {

const char* to_string(FlightEntry::State s) {
  switch (s) {
    case FlightEntry::State::queued: return "queued";
    case FlightEntry::State::running: return "running";
    case FlightEntry::State::done: return "done";
    case FlightEntry::State::failed: return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity) {}

uint64_t FlightRecorder::add(FlightEntry&& entry) {
  if (ring_.empty()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  entry.id = next_id_++;
  ring_[(entry.id - 1) % ring_.size()] = std::move(entry);
  return next_id_ - 1;
}

FlightEntry* FlightRecorder::find(uint64_t id) {
  if (id == 0 || ring_.empty()) return nullptr;
  FlightEntry& e = ring_[(id - 1) % ring_.size()];
  return e.id == id ? &e : nullptr;
}

void FlightRecorder::mark_running(uint64_t id, FlightEntry::Clock::time_point started) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = find(id)) {
    e->state = FlightEntry::State::running;
    e->started = started;
  }
}

void FlightRecorder::mark_ended(uint64_t id, const Status& status) {
  if (id == 0) return;
  mark_ended(id, status, FlightEntry::Clock::now());
}

void FlightRecorder::mark_ended(uint64_t id, const Status& status,
                                FlightEntry::Clock::time_point ended) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = find(id)) {
    e->state = status.ok() ? FlightEntry::State::done : FlightEntry::State::failed;
    e->ended = ended;
    if (!status.ok()) e->error = status.to_string();
  }
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::vector<FlightEntry> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t n = std::min<uint64_t>(next_id_ - 1, ring_.size());
    for (uint64_t id = next_id_ - n; id < next_id_; ++id) out.push_back(ring_[(id - 1) % ring_.size()]);
  }
  for (FlightEntry& e : out) {
    if (e.state != FlightEntry::State::running) continue;
    std::shared_ptr<Work> w = e.work.lock();
    if (!w || !w->test()) continue;
    Status st = w->status();
    e.state = st.ok() ? FlightEntry::State::done : FlightEntry::State::failed;
    e.ended = w->end_time();
    if (!st.ok()) e.error = st.to_string();
  }
  return out;
}

namespace {

std::string describe(const FlightEntry& e) {
  Fingerprint fp;
  fp.kind = e.kind;
  fp.dtype = e.dtype;
  fp.op = e.op;
  fp.root = e.root;
  fp.count = e.count;
  fp.seq = e.seq;
  if (e.kind == OpKind::send || e.kind == OpKind::recv) {
    std::string who = e.peer < 0 ? "any rank" : fmt::format("rank {}", e.peer);
    return fmt::format("{} of {} bytes {} {} (tag {})", to_string(e.kind), e.count,
                       e.kind == OpKind::send ? "to" : "from", who, e.tag);
  }
  return fp.describe();
}

double seconds_since(FlightEntry::Clock::time_point t, FlightEntry::Clock::time_point now) {
  return std::chrono::duration<double>(t - now).count();
}

}  // namespace

std::string FlightRecorder::to_json(int rank, int size) const {
  const auto now = FlightEntry::Clock::now();
  nlohmann::json entries = nlohmann::json::array();
  for (const FlightEntry& e : snapshot()) {
    nlohmann::json j = {{"id", e.id},
                        {"op", to_string(e.kind)},
                        {"describe", describe(e)},
                        {"state", to_string(e.state)},
                        {"queued_s", seconds_since(e.queued, now)}};
    if (e.seq != 0) j["seq"] = e.seq;
    if (e.algorithm != nullptr) j["algorithm"] = e.algorithm;
    if (e.kind == OpKind::send || e.kind == OpKind::recv) {
      j["peer"] = e.peer;
      j["tag"] = e.tag;
      j["bytes"] = e.count;
    } else {
      j["dtype"] = to_string(e.dtype);
      j["count"] = e.count;
      if (e.root >= 0) j["root"] = e.root;
    }
    if (e.started != FlightEntry::Clock::time_point{}) j["started_s"] = seconds_since(e.started, now);
    if (e.ended != FlightEntry::Clock::time_point{}) j["ended_s"] = seconds_since(e.ended, now);
    if (!e.error.empty()) j["error"] = e.error;
    entries.push_back(std::move(j));
  }
  nlohmann::json doc = {{"rank", rank}, {"size", size}, {"entries", std::move(entries)}};
  return doc.dump();
}

std::string FlightRecorder::pending_summary() const {
  const auto now = FlightEntry::Clock::now();
  std::string out;
  for (const FlightEntry& e : snapshot()) {
    if (e.state == FlightEntry::State::done || e.state == FlightEntry::State::failed) continue;
    const auto since = e.state == FlightEntry::State::running ? e.started : e.queued;
    out += fmt::format("{}{} {} for {:.1f} s", out.empty() ? "" : "; ", describe(e),
                       to_string(e.state), -seconds_since(since, now));
  }
  return out.empty() ? "no operation in flight" : out;
}

}  // namespace weft
