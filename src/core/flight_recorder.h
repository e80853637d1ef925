// FlightRecorder: a bounded ring of this rank's most recent operations, kept for diagnosis.
//
// Each operation gets an entry when it is submitted (state queued), is marked running when it
// starts and done/failed when it ends. Point-to-point operations complete inside the transport,
// so their entry keeps a weak reference to the Work and reads its state when a snapshot is taken.
// When the ring is full the oldest entry is overwritten; updates to an overwritten entry are
// dropped. A capacity of 0 records nothing. All methods are thread-safe; each takes one short
// lock, so recording costs well under a microsecond per operation.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "weft/status.h"
#include "weft/types.h"

namespace weft {

class Work;

struct FlightEntry {
  enum class State : uint8_t { queued, running, done, failed };
  using Clock = std::chrono::steady_clock;

  uint64_t id = 0;   // 1, 2, ... in submission order (0: none)
  OpKind kind = OpKind::allreduce;
  DataType dtype = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = -1;
  uint64_t count = 0;  // elements (collectives) or bytes (send/recv)
  uint64_t seq = 0;    // collective sequence number (0 for point-to-point)
  int peer = -1;       // send/recv peer (-1: any source, or a collective)
  uint32_t tag = 0;
  const char* algorithm = nullptr;  // collectives: what the selector chose ("ring", "hierarchical")
  State state = State::queued;
  Clock::time_point queued{}, started{}, ended{};
  std::string error;  // when failed
  std::weak_ptr<Work> work;  // point-to-point: state read at snapshot time
};

const char* to_string(FlightEntry::State s);

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity);

  // Records a new entry (its id is set here) and returns the id; 0 when recording is off.
  uint64_t add(FlightEntry&& entry);
  void mark_running(uint64_t id, FlightEntry::Clock::time_point started);
  void mark_ended(uint64_t id, const Status& status);
  void mark_ended(uint64_t id, const Status& status, FlightEntry::Clock::time_point ended);

  // The entries still held, oldest first, point-to-point states resolved.
  std::vector<FlightEntry> snapshot() const;
  // {"rank":..,"size":..,"now_s":..,"entries":[{...}]} with times in seconds relative to now
  // (negative: in the past).
  std::string to_json(int rank, int size) const;
  // One line per operation that has not finished, oldest first ("allreduce #812 (f32 x 1024,
  // sum) running for 31.2 s"), or "no operation in flight".
  std::string pending_summary() const;

 private:
  FlightEntry* find(uint64_t id);  // mu_ held

  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;  // ring_[(id - 1) % capacity]
  uint64_t next_id_ = 1;
};

}  // namespace weft
