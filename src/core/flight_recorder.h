// FlightRecorder: a bounded ring of this rank's most recent operations, kept for diagnosis.
//
// Each operation gets an entry when it is submitted (state queued), is marked running when it
// starts and done/failed when it ends. Point-to-point operations complete inside the transport,
// so their entry keeps a weak reference to the Work and reads its state when a snapshot is taken
// (mark_posted hands the entry over to it). When the ring is full the oldest entry is
// overwritten, but never one whose operation is still open: an operation submitted while
// `capacity` older ones are all still open is not recorded. The capacity is rounded up to a power
// of two; 0 records nothing.
//
// Cost: recording sits on the path of every operation, so writers take no lock. add() calls must
// be serialised by the caller (the communicator submits under its own lock); mark_* are called by
// the thread that runs the operation. Each slot is a seqlock (a version that is odd while a
// writer changes it) over atomic fields: a snapshot copies a slot and retries if the version
// moved. The rare fields (error text, Work) live under a mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "weft/options.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft {

class Work;

struct FlightEntry {
  enum class State : uint8_t { queued, running, done, failed };
  using Clock = weft::Clock;

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
  ~FlightRecorder();

  // Records a new entry (its id is set here) and returns the id; 0 when recording is off or the
  // slot it would take holds an operation that is still open. Calls must not overlap.
  uint64_t add(FlightEntry&& entry);
  // add() for a collective without building an entry (the common path): queued (and running
  // from the same moment when `running`).
  uint64_t add_collective(OpKind kind, DataType dtype, ReduceOp op, int root, uint64_t count,
                          uint64_t seq, Algorithm algorithm, FlightEntry::Clock::time_point queued,
                          bool running);
  void mark_running(uint64_t id, FlightEntry::Clock::time_point started);
  // A collective whose algorithm was settled only when it ran.
  void set_algorithm(uint64_t id, Algorithm algorithm);
  // Point-to-point: running from `started`, and from now on its state is read from its Work.
  void mark_posted(uint64_t id, FlightEntry::Clock::time_point started);
  void mark_ended(uint64_t id, const Status& status);
  void mark_ended(uint64_t id, const Status& status, FlightEntry::Clock::time_point ended);

  // The entries still held, oldest first, point-to-point states resolved.
  std::vector<FlightEntry> snapshot() const;
  // {"rank":..,"size":..,"transport":..,"entries":[{...}]} with times in seconds relative to
  // now (negative: in the past); "transport" (how this rank reaches its peers) only when given,
  // and "transport_counters" ({name: value}) only when `counters` is not empty.
  std::string to_json(int rank, int size, const std::string& transport = {},
                      const std::vector<std::pair<std::string, uint64_t>>& counters = {}) const;
  // One line per operation that has not finished, oldest first ("allreduce #812 (f32 x 1024,
  // sum) running for 31.2 s"), or "no operation in flight".
  std::string pending_summary() const;

 private:
  struct Slot;
  struct Aux;
  struct Fields;
  Slot* slot_of(uint64_t id) const;
  // Writes a new entry into the next slot (Aux: point-to-point details, error, Work; nullptr:
  // none); returns its id, or 0 when the slot still holds an open operation.
  uint64_t record(const Fields& f, Aux* aux);
  // Marks the end of the writer's ownership of an open slot (add may reuse it after this).
  void update(uint64_t id, FlightEntry::State state, FlightEntry::Clock::time_point started,
              FlightEntry::Clock::time_point ended, const Status* status, bool release);

  const size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_id_{1};
  std::vector<Aux> aux_ GUARDED_BY(aux_mu_);  // one per slot
  mutable Mutex aux_mu_;                      // a leaf: taken under the communicator's mu_
};

}  // namespace weft
