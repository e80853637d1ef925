// Shared-memory layout of the shm transport and the segment that holds it.
//
// A rank's segment: a 4 KiB SegmentHeader, two SharedSlots (the owner's contributions to small
// collectives, which every peer reads in place), then one slot per peer (in rank order, skipping
// the owner): a 4 KiB RingCtl page followed by the ring's bytes. The ring in slot s carries records
// from peer s to the owner. Records are 64-byte aligned, never wrap (a pad record fills the end of
// the ring instead) and are described in docs/wire-format.md. Everything a peer writes here is
// checked before use: a peer that scribbles on the segment gets the transport failed with
// ErrorCode::protocol, never a crash or a write outside a posted buffer.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "weft/status.h"

namespace weft::shm {

inline constexpr uint64_t kSegmentMagic = 0x314d485354464557ull;  // "WEFTSHM1" little-endian
inline constexpr uint32_t kSegmentVersion = 4;
inline constexpr size_t kPage = 4096;
inline constexpr size_t kRecordBytes = 64;
inline constexpr size_t kMaxErrorText = 1024;

enum class RecordType : uint32_t {
  pad = 1,     // skip to the end of the ring
  eager = 2,   // a whole message of `len` bytes follows
  rts = 3,     // a message of `bytes` bytes (msg_id) waits for a CTS, or, when `offset` is not 0,
               // may be read at that address of the sender (process_vm_readv), then acknowledged
  cts = 4,     // the receive of msg_id is posted: send its data
  data = 5,    // `len` bytes of message msg_id at `offset`
  credit = 6,  // the receiver consumed `bytes` eager bytes
  read = 7,    // the receiver read message msg_id from the sender's memory: it is delivered
};
inline constexpr uint32_t kMaxRecordType = 7;

struct Record {
  uint32_t type = 0;
  uint32_t len = 0;     // payload bytes after this header
  uint64_t tag = 0;
  uint64_t bytes = 0;   // message size (eager, rts) or credit returned
  uint64_t msg_id = 0;  // rts, cts, data, read
  uint64_t offset = 0;  // data: position in the message; rts: the sender's buffer address or 0
  uint8_t kind = 0, dtype = 0, op = 0, reserved = 0;
  int32_t root = -1;
  uint64_t count = 0;
  uint64_t seq = 0;
};
static_assert(sizeof(Record) == kRecordBytes);

inline constexpr size_t record_size(size_t payload) {
  return kRecordBytes + ((payload + kRecordBytes - 1) & ~(kRecordBytes - 1));
}

// Producer and consumer positions of one ring (bytes since the start, never wrapped).
struct RingCtl {
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the producer after each record
  // Written by the consumer lazily (every quarter ring, or at once when the producer waits), so
  // the line rarely moves between the caches; the producer reads it only when its cached copy
  // says the ring is full.
  alignas(64) std::atomic<uint64_t> head{0};
  // The producer found the ring full and waits for the consumer to publish head and ring its
  // doorbell (on head's line: the consumer reads both together).
  std::atomic<uint32_t> producer_waiting{0};
};
static_assert(sizeof(RingCtl) <= kPage);

enum SegmentState : uint32_t { kRunning = 0, kDeparted = 1, kFailed = 2 };

struct SegmentHeader {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = 0;
  int32_t size = 0;
  int32_t pid = 0;
  uint64_t token = 0;
  uint64_t ring_bytes = 0;
  // Bumped by whoever gives the owner something to do; the owner sleeps on it (futex).
  alignas(64) std::atomic<uint32_t> doorbell{0};
  alignas(64) std::atomic<uint32_t> sleepers{0};
  // kDeparted: closed cleanly; kFailed: error_code and error_text say why (written before).
  alignas(64) std::atomic<uint32_t> state{kRunning};
  uint32_t error_code = 0;
  char error_text[kMaxErrorText] = {};
  // Bumped by the owner's watchdog every peer_timeout/5; peers that see it stand still for
  // peer_timeout declare the owner failed (stopped, frozen).
  alignas(64) std::atomic<uint64_t> heartbeat{0};
  // The CPU the owner last waited on (sched_getcpu), -1 before its first wait. Ranks that
  // outnumber the CPUs read each other's to even out how many share a CPU (ShmTransport).
  alignas(64) std::atomic<int32_t> cpu{-1};
};
static_assert(sizeof(SegmentHeader) <= kPage);

// One of the two buffers through which the owner publishes its input to a small collective
// (Algorithm::shm_direct): operation number c uses SharedSlot c % 2. The owner writes the fields
// and the data, then `call` = c (release); peers wait for that, check the fingerprint and read
// the data in place. The owner reuses a slot (operation c + 2) only once every peer has published
// c + 1, i.e. finished reading c. The data starts
// right after the header (16-byte aligned), so up to 16 bytes share its cache line: an 8-byte
// allreduce moves one line per peer.
struct SharedSlot {
  std::atomic<uint64_t> call{0};
  std::atomic<uint64_t> seq{0};    // the collective's Fingerprint
  std::atomic<uint64_t> count{0};
  std::atomic<uint8_t> kind{0}, dtype{0}, op{0}, reserved{0};
  std::atomic<int32_t> root{-1};
  std::atomic<uint64_t> bytes{0};  // data bytes that follow (at most kSharedBytes)
  std::atomic<uint64_t> pad{0};
  // data follows
};
static_assert(sizeof(SharedSlot) == 48);
inline constexpr size_t kSharedSlotBytes = 16 << 10;
inline constexpr size_t kSharedHeader = sizeof(SharedSlot);
inline constexpr size_t kSharedBytes = kSharedSlotBytes - kSharedHeader;
// The data of a SharedSlot (kSharedBytes).
inline uint8_t* shared_data(SharedSlot& s) { return reinterpret_cast<uint8_t*>(&s) + kSharedHeader; }
inline const uint8_t* shared_data(const SharedSlot& s) {
  return reinterpret_cast<const uint8_t*>(&s) + kSharedHeader;
}

inline constexpr size_t segment_bytes(int size, size_t ring_bytes) {
  return kPage + 2 * kSharedSlotBytes +
         static_cast<size_t>(size > 1 ? size - 1 : 0) * (kPage + ring_bytes);
}

// Bumps the owner's doorbell and wakes it if it sleeps (state changes, freed room: rare events).
void ring(SegmentHeader& h);
// After publishing a record: rings only if the owner announced a sleep. An owner about to sleep
// increments `sleepers`, reads the doorbell, then looks for records once more, so one of the two
// sides always sees the other (both go through a full fence).
inline void nudge(SegmentHeader& h) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h.sleepers.load(std::memory_order_relaxed) != 0) ring(h);
}
// Sleeps on `h`'s doorbell while it still reads `seen`, at most `ns` nanoseconds.
void futex_wait(SegmentHeader& h, uint32_t seen, int64_t ns);

// One mapped segment: this rank's own (created) or a peer's (opened).
class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates and maps a fresh segment named `name` (reserving its memory so a full /dev/shm is an
  // error here, not a SIGBUS later) and writes the header.
  static Result<std::unique_ptr<Segment>> create(const std::string& name, int rank, int size,
                                                 uint64_t token, size_t ring_bytes);
  // Maps the existing segment `name` and checks its header against what the caller expects.
  static Result<std::unique_ptr<Segment>> open(const std::string& name, int rank, int size,
                                               uint64_t token, size_t ring_bytes);
  // Removes the name (the memory lives on while mapped). Idempotent.
  void unlink();

  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  // The ring carrying records from `sender` to this segment's owner.
  RingCtl& ctl(int sender) const;
  uint8_t* ring(int sender) const;
  // SharedSlot `parity` (0 or 1); its data: shared_data().
  SharedSlot& shared_slot(int parity) const;
  const std::string& name() const { return name_; }

 private:
  size_t slot_offset(int sender) const;

  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int owner_ = 0;
  size_t ring_bytes_ = 0;
  bool linked_ = false;
};

// Unlinks segments in /dev/shm that weft processes which no longer exist left behind (a job
// killed during set-up). Returns how many were removed.
int remove_stale_segments();
// Unlinks the segments of the given processes, which must have exited (a launcher's ranks once
// the job is over: a rank killed during set-up leaves its segment behind). Returns how many.
int remove_segments_of(std::span<const pid_t> exited);

}  // namespace weft::shm
