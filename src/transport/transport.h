// Transport: moves tagged byte messages between the ranks of one communicator.
//
// Collectives never name a transport: they post Requests through a Context (collective/context.h)
// which forwards them here. Implementations: tcp/ (sockets on an epoll reactor), shm/ (rings in
// shared memory between the processes of one host) and local/ (ranks as threads of one process,
// for tests). Every implementation must:
//  - match a receive to a send by (peer, tag); several messages with the same (peer, tag) match in
//    the order they were posted;
//  - deliver the payload straight into the posted receive buffer when it is already posted;
//  - compare the Fingerprint of the send with that of the receive and end both with
//    ErrorCode::mismatch (naming both calls and both ranks) when they disagree;
//  - complete every request exactly once and call its Completion's notify() afterwards;
//  - accept a point-to-point receive whose peer is kAnyPeer: it matches the first message with its
//    tag from any peer, and the transport stores that peer in Request::peer before completing it
//    (an implementation that cannot do this completes it with ErrorCode::invalid_argument). A
//    message takes the oldest posted receive that accepts it, whether that names its peer or any
//    peer; a receive from any peer takes, of the messages already waiting, the one that arrived
//    first. transport/matching.h implements these rules for every transport.
// post_* may be called from any thread. A Request must stay alive and untouched by its poster until
// done() is true or fail() has returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/completion.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft {

// Identifies the operation a message belongs to. Sent with every message.
struct Fingerprint {
  OpKind kind = OpKind::send;
  DataType dtype = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int32_t root = -1;
  uint64_t count = 0;
  uint64_t seq = 0;  // per-communicator sequence number of collectives (p2p: 0)

  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
  // "allreduce #17 (f32 x 1048576, sum)", "broadcast #3 (i32 x 9, root 2)", "send (1024 bytes)".
  std::string describe() const;
};

// True when a message sent under `sender` may be received by a receive posted under `receiver`.
bool fingerprints_compatible(const Fingerprint& sender, const Fingerprint& receiver);

// Mismatch checks every transport makes, with the same messages. collective_mismatch: a message
// of collective `remote` from rank `peer` against the collective `current` that rank `rank`
// runs (messages of later collectives are fine). receive_mismatch: receive `r` posted on `rank`
// against a message of `bytes` bytes that `peer` sent under `remote`. Ok when they agree.
struct Request;
Status collective_mismatch(int rank, const Fingerprint& current, int peer, const Fingerprint& remote);
Status receive_mismatch(int rank, const Request& r, int peer, uint64_t bytes,
                        const Fingerprint& remote);

// Tags: collectives use collective_tag(seq, slot); point-to-point user tags use p2p_tag(tag).
inline constexpr uint64_t kP2pTagBit = 1ull << 63;
inline constexpr uint64_t collective_tag(uint64_t seq, uint32_t slot) {
  return ((seq & ((1ull << 40) - 1)) << 20) | (slot & ((1u << 20) - 1));
}
inline constexpr uint64_t p2p_tag(uint32_t tag) { return kP2pTagBit | tag; }
// Request::peer of a receive from any peer (point-to-point only).
inline constexpr int kAnyPeer = -1;

struct Request {
  enum class Kind : uint8_t { send, recv };

  // Set by the poster before posting.
  Kind kind = Kind::send;
  int peer = -1;
  uint64_t tag = 0;
  void* buf = nullptr;  // for sends: the bytes to send (not modified)
  size_t bytes = 0;
  Fingerprint fp;
  Completion* completion = nullptr;  // notified after done

  // Set by the transport.
  Status status;  // valid once done()
  // Private to the transport while the request is posted (progress bookkeeping).
  size_t progress = 0;
  uint32_t parts_left = 0;
  uint64_t msg_id = 0;
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Transport side: store status, then call this.
  // The poster may destroy the Request (and its Completion) as soon as it sees done(), so the
  // Completion is bracketed and this Request is not touched after done_ is set.
  void complete(Status s) {
    status = std::move(s);
    Completion* c = completion;
    if (c != nullptr) c->begin_notify();
    done_.store(true, std::memory_order_release);
    if (c != nullptr) {
      c->notify();
      c->end_notify();
    }
  }
  void reset() {
    done_.store(false, std::memory_order_relaxed);
    status = Status();
    progress = 0;
    parts_left = 0;
    msg_id = 0;
  }

 private:
  std::atomic<bool> done_{false};
};

// What a transport counts for diagnostics (the flight record's "transport_counters").
struct TransportCounters {
  uint64_t single_copy_messages = 0;  // received by reading the sender's memory (shm)
  uint64_t single_copy_bytes = 0;
  uint64_t single_copy_refused = 0;   // peers whose memory the kernel refused to let us read
  uint64_t cpu_moves = 0;  // times this rank moved to a less crowded CPU (shm, oversubscribed)
  // Eager payloads that arrived before their receive and wait in staging memory (TCP): the most
  // bytes held at once, over all peers. Credits bound it by eager_credit_bytes per peer.
  uint64_t unexpected_bytes_peak = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void post_send(Request* r) = 0;
  virtual void post_recv(Request* r) = 0;

  // Called by the communicator before the collective with sequence `fp.seq` starts, so that
  // messages of a different operation with the same sequence (a mismatch) are caught even when
  // no receive is posted for them.
  virtual void begin_operation(const Fingerprint& fp) = 0;
  // Called by the same thread when that collective has returned (successfully or not).
  virtual void end_operation() {}

  // Sleeps until `completion` moves past `seen` or `deadline` passes (returns false then). A
  // transport may use the time to receive on the calling thread for `hint`'s peer, which saves
  // the hand-off from its own thread; the default just sleeps on the completion.
  virtual bool wait(Completion& completion, uint32_t seen, const Request* hint,
                    Completion::Clock::time_point deadline) {
    (void)hint;
    return completion.wait_for_change(seen, deadline);
  }

  // Small collectives through memory every rank maps (Algorithm::shm_direct, collective/shared_buffer.cc):
  // each rank publishes its input in a buffer of its own and reads the peers' in place.
  // shared_capacity(): the bytes one rank can publish per operation; 0 when the transport has no
  // such memory (then the calls below are never made). Only the thread running collectives calls
  // them, between begin_operation and end_operation, and every rank makes the same sequence of
  // shared_begin calls (one per collective run this way).
  virtual size_t shared_capacity() const { return 0; }
  // Starts this rank's part of collective `fp`: waits until every peer has finished reading what
  // this rank published for the operation before last, then returns the buffer
  // (shared_capacity() bytes) to write this rank's input into. Errors: the transport's failure,
  // or at `deadline` ErrorCode::timeout with the message "waiting for rank P" (the caller puts
  // the operation in front; shared_read's timeout too).
  virtual Result<uint8_t*> shared_begin(const Fingerprint& fp,
                                        Completion::Clock::time_point deadline) {
    (void)fp;
    (void)deadline;
    return Status(ErrorCode::internal, "this transport has no shared buffers");
  }
  // Makes the first `bytes` of that buffer visible to the peers (and wakes those that sleep).
  virtual void shared_publish(size_t bytes) { (void)bytes; }
  // Waits until `peer` (this rank included) has published the current operation and returns
  // its bytes, unchanged until this rank's next shared_begin. A peer that published a different
  // collective ends the wait with ErrorCode::mismatch naming both calls.
  virtual Result<std::span<const uint8_t>> shared_read(int peer,
                                                       Completion::Clock::time_point deadline) {
    (void)peer;
    (void)deadline;
    return Status(ErrorCode::internal, "this transport has no shared buffers");
  }

  // Ends every pending request with `status`, tells the peers (best effort), and returns only when
  // no request or buffer is referenced any more. Later posts end at once with the first error.
  virtual void fail(const Status& status) = 0;
  // The first error that broke this transport (a lost peer, a protocol error, fail()); ok if none.
  virtual Status error() const = 0;
  // Failure detection, called about every peer_timeout/5 by the communicator's watchdog thread
  // (never concurrently with itself): sends a heartbeat to every peer nothing went to since the
  // last call, and returns ErrorCode::peer_lost naming the first peer from which nothing arrived
  // for `peer_timeout` (the caller then fails the transport). Ok while every peer is heard from.
  virtual Status heartbeat(std::chrono::steady_clock::time_point now,
                           std::chrono::milliseconds peer_timeout) {
    (void)now;
    (void)peer_timeout;
    return Status();
  }
  // The peers this transport saw die, drop their connection or go silent, in rank order. A peer
  // that reported an error of its own (it is alive) is not among them.
  virtual std::vector<int> lost_peers() const { return {}; }
  // Counters since start, readable from any thread.
  virtual TransportCounters counters() const { return {}; }
  // Clean shutdown once every operation has ended: tells the peers this rank is leaving (so its
  // exit is not taken for a failure) and waits at most `timeout` for what they need from it.
  // Requests still pending end with ErrorCode::aborted.
  virtual void close(std::chrono::milliseconds timeout) { (void)timeout; }
};

}  // namespace weft
