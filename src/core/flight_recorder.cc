#include "core/flight_recorder.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <bit>
#include <cstring>
#include <thread>

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

// One ring slot, one cache line: recording an operation touches nothing else. Every field a
// snapshot reads without the mutex is atomic (relaxed: the version orders them); `version` is odd
// while a writer is inside. `open`: the operation has not ended (or, for point-to-point, not yet
// been handed to its Work): add() must not reuse the slot. Point-to-point details, the error text
// and the Work live in the slot's Aux, under aux_mu_.
struct alignas(64) FlightRecorder::Slot {
  std::atomic<uint32_t> version{0};
  std::atomic<uint8_t> kind{0}, dtype{0}, op{0}, state{0};
  std::atomic<bool> open{false};
  std::atomic<bool> has_aux{false};
  std::atomic<uint8_t> algorithm{kNoAlgorithm};  // an Algorithm, or kNoAlgorithm
  std::atomic<int32_t> root{-1};
  std::atomic<uint64_t> id{0};
  std::atomic<uint64_t> count{0}, seq{0};
  std::atomic<int64_t> queued{0}, started{0}, ended{0};  // Clock ticks; 0: not yet
  static constexpr uint8_t kNoAlgorithm = 0xff;
};
static_assert(sizeof(std::atomic<uint64_t>) == 8);

struct FlightRecorder::Aux {
  int peer = -1;
  uint32_t tag = 0;
  std::string error;
  std::weak_ptr<Work> work;
};

namespace {

using Clock = FlightEntry::Clock;

int64_t ticks(Clock::time_point t) { return t.time_since_epoch().count(); }
Clock::time_point from_ticks(int64_t t) { return Clock::time_point(Clock::duration(t)); }

// Seqlock writer brackets: the odd version is visible before any field changes, the even one
// after all of them.
void write_begin(std::atomic<uint32_t>& v) {
  v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}
void write_end(std::atomic<uint32_t>& v) {
  v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

constexpr auto R = std::memory_order_relaxed;

}  // namespace

// A power of two, so finding a slot is a mask, not a division (on the path of every operation).
FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity > 0 ? std::bit_ceil(capacity) : 0),
      slots_(capacity_ > 0 ? std::make_unique<Slot[]>(capacity_) : nullptr),
      aux_(capacity_) {}

FlightRecorder::~FlightRecorder() = default;

FlightRecorder::Slot* FlightRecorder::slot_of(uint64_t id) const {
  if (id == 0 || capacity_ == 0) return nullptr;
  return &slots_[(id - 1) & (capacity_ - 1)];
}

// What both add() forms write into a slot (besides the Aux).
struct FlightRecorder::Fields {
  OpKind kind;
  DataType dtype;
  ReduceOp op;
  FlightEntry::State state;
  int root;
  uint64_t count, seq;
  uint8_t algorithm;
  int64_t queued, started, ended;  // ticks; 0: not yet
};

uint64_t FlightRecorder::record(const Fields& f, Aux* aux) {
  if (capacity_ == 0) return 0;
  const uint64_t id = next_id_.load(R);
  Slot& s = *slot_of(id);
  // Acquire: the last writer of an ended operation released the slot after its final write.
  if (s.open.load(std::memory_order_acquire)) return 0;
  write_begin(s.version);
  s.id.store(id, R);
  s.kind.store(static_cast<uint8_t>(f.kind), R);
  s.dtype.store(static_cast<uint8_t>(f.dtype), R);
  s.op.store(static_cast<uint8_t>(f.op), R);
  s.state.store(static_cast<uint8_t>(f.state), R);
  s.root.store(f.root, R);
  s.count.store(f.count, R);
  s.seq.store(f.seq, R);
  s.algorithm.store(f.algorithm, R);
  s.queued.store(f.queued, R);
  s.started.store(f.started, R);
  s.ended.store(f.ended, R);
  if (aux != nullptr || s.has_aux.load(R)) {
    MutexLock lock(aux_mu_);
    aux_[static_cast<size_t>(&s - slots_.get())] = aux != nullptr ? std::move(*aux) : Aux();
    s.has_aux.store(aux != nullptr, R);
  }
  s.open.store(f.state != FlightEntry::State::done && f.state != FlightEntry::State::failed, R);
  write_end(s.version);
  next_id_.store(id + 1, std::memory_order_release);
  return id;
}

uint64_t FlightRecorder::add(FlightEntry&& entry) {
  uint8_t algorithm = Slot::kNoAlgorithm;
  for (int a = 0; entry.algorithm != nullptr && a < kAlgorithmCount; ++a) {
    if (std::strcmp(entry.algorithm, to_string(static_cast<Algorithm>(a))) == 0) {
      algorithm = static_cast<uint8_t>(a);
    }
  }
  auto t = [](Clock::time_point p) { return p == Clock::time_point{} ? 0 : ticks(p); };
  const Fields f{entry.kind,  entry.dtype, entry.op,   entry.state,     entry.root,
                 entry.count, entry.seq,   algorithm, ticks(entry.queued), t(entry.started),
                 t(entry.ended)};
  const bool has_aux =
      !entry.error.empty() || !entry.work.expired() || entry.peer != -1 || entry.tag != 0;
  Aux aux{entry.peer, entry.tag, std::move(entry.error), std::move(entry.work)};
  return record(f, has_aux ? &aux : nullptr);
}

uint64_t FlightRecorder::add_collective(OpKind kind, DataType dtype, ReduceOp op, int root,
                                        uint64_t count, uint64_t seq, Algorithm algorithm,
                                        Clock::time_point queued, bool running) {
  const Fields f{kind, dtype, op,
                 running ? FlightEntry::State::running : FlightEntry::State::queued, root, count,
                 seq, static_cast<uint8_t>(algorithm), ticks(queued), running ? ticks(queued) : 0,
                 0};
  return record(f, nullptr);
}

void FlightRecorder::update(uint64_t id, FlightEntry::State state, Clock::time_point started,
                            Clock::time_point ended, const Status* status, bool release) {
  Slot* s = slot_of(id);
  // While open the slot is ours: add() does not take it, so the id cannot change under us.
  if (s == nullptr || s->id.load(R) != id || !s->open.load(R)) return;
  write_begin(s->version);
  s->state.store(static_cast<uint8_t>(state), R);
  if (started != Clock::time_point{}) s->started.store(ticks(started), R);
  if (ended != Clock::time_point{}) s->ended.store(ticks(ended), R);
  if (status != nullptr && !status->ok()) {
    MutexLock lock(aux_mu_);
    aux_[static_cast<size_t>(s - slots_.get())].error = status->to_string();
    s->has_aux.store(true, R);
  }
  write_end(s->version);
  if (release) s->open.store(false, std::memory_order_release);
}

void FlightRecorder::mark_running(uint64_t id, Clock::time_point started) {
  update(id, FlightEntry::State::running, started, {}, nullptr, false);
}

void FlightRecorder::set_algorithm(uint64_t id, Algorithm algorithm) {
  Slot* s = slot_of(id);
  if (s == nullptr || s->id.load(R) != id || !s->open.load(R)) return;
  write_begin(s->version);
  s->algorithm.store(static_cast<uint8_t>(algorithm), R);
  write_end(s->version);
}

void FlightRecorder::mark_posted(uint64_t id, Clock::time_point started) {
  update(id, FlightEntry::State::running, started, {}, nullptr, true);
}

void FlightRecorder::mark_ended(uint64_t id, const Status& status) {
  if (id == 0) return;
  mark_ended(id, status, Clock::now());
}

void FlightRecorder::mark_ended(uint64_t id, const Status& status, Clock::time_point ended) {
  update(id, status.ok() ? FlightEntry::State::done : FlightEntry::State::failed, {}, ended,
         &status, true);
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::vector<FlightEntry> out;
  if (capacity_ == 0) return out;
  const uint64_t next = next_id_.load(std::memory_order_acquire);
  const uint64_t n = std::min<uint64_t>(next - 1, capacity_);
  for (uint64_t id = next - n; id < next; ++id) {
    const Slot& s = *slot_of(id);
    FlightEntry e;
    // The Aux is written inside the writer's version bracket, under aux_mu_: a version that is
    // still v1 while we hold the mutex means the Aux belongs to the fields just read (a new
    // operation taking the slot in between would have moved it).
    for (int attempt = 0;; ++attempt) {
      if (attempt > 64) std::this_thread::yield();
      const uint32_t v1 = s.version.load(std::memory_order_acquire);
      if ((v1 & 1) != 0) continue;
      e.id = s.id.load(R);
      e.kind = static_cast<OpKind>(s.kind.load(R));
      e.dtype = static_cast<DataType>(s.dtype.load(R));
      e.op = static_cast<ReduceOp>(s.op.load(R));
      e.state = static_cast<FlightEntry::State>(s.state.load(R));
      e.root = s.root.load(R);
      e.count = s.count.load(R);
      e.seq = s.seq.load(R);
      const uint8_t a = s.algorithm.load(R);
      e.algorithm = a < kAlgorithmCount ? to_string(static_cast<Algorithm>(a)) : nullptr;
      e.queued = from_ticks(s.queued.load(R));
      const int64_t st = s.started.load(R), en = s.ended.load(R);
      e.started = st == 0 ? Clock::time_point{} : from_ticks(st);
      e.ended = en == 0 ? Clock::time_point{} : from_ticks(en);
      const bool aux = s.has_aux.load(R);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s.version.load(R) != v1) continue;
      if (!aux || e.id != id) break;
      MutexLock lock(aux_mu_);
      if (s.version.load(R) != v1) continue;
      const Aux& x = aux_[static_cast<size_t>(&s - slots_.get())];
      e.peer = x.peer;
      e.tag = x.tag;
      e.error = x.error;
      e.work = x.work;
      break;
    }
    if (e.id != id) continue;  // not recorded (its slot was still busy) or already reused
    out.push_back(std::move(e));
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

std::string FlightRecorder::to_json(
    int rank, int size, const std::string& transport,
    const std::vector<std::pair<std::string, uint64_t>>& counters) const {
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
  if (!transport.empty()) doc["transport"] = transport;
  if (!counters.empty()) {
    nlohmann::json c = nlohmann::json::object();
    for (const auto& [name, value] : counters) c[name] = value;
    doc["transport_counters"] = std::move(c);
  }
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
