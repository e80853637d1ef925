// The operations a CommunicatorImpl queues (op_queue.cc): a collective or a point-to-point
// send or receive, with what the queue needs of either (its Work and flight-record entry).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>

#include "base/clock.h"
#include "collective/context.h"
#include "core/work_impl.h"
#include "transport/transport.h"
#include "weft/types.h"

namespace weft {

// A collective: execute() runs it to its end.
struct CollectiveOp {
  CollectiveArgs args;
  Fingerprint fp;
  Algorithm algorithm = Algorithm::automatic;  // chosen once at submission
  bool hierarchical = false;                   // run by the Hierarchy
  // Flat or hierarchical by measured cost (HierarchyChoice): the call's index in its class,
  // -1 when not chosen that way; the sequence number reserved for the agreement after the
  // last trial.
  int choice = -1;
  uint64_t agree_seq = 0;
  size_t bytes = 0;           // payload_bytes(args, size())
  bool coarse_clock = false;  // run_blocking: stamped with coarse_now()
};
// A send or a receive: execute() only posts its request (the Work completes in the transport).
struct PointToPointOp {
  void* buf = nullptr;
  size_t bytes = 0;
  int peer = -1;  // kAnySource for a receive from any rank
  uint32_t tag = 0;
};
// An entry of the queue (op_queue.cc).
struct Op {
  OpKind kind = OpKind::send;
  std::variant<CollectiveOp, PointToPointOp> body;
  std::shared_ptr<WorkImpl> work;  // null when run_blocking runs it without one
  uint64_t record = 0;             // flight recorder entry
  // When it started if it runs inline at submission (then it is the queueing time); unset when
  // it waited in the queue.
  Clock::time_point started{};
  bool p2p() const { return std::holds_alternative<PointToPointOp>(body); }
};

}  // namespace weft
