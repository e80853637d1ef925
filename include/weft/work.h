// Work: the handle of an operation started with an *_async call.
//
// Operations of one communicator run in the order they were called, like a stream. A Work is
// shared: the communicator completes it from its own thread, any thread may test() or wait() on
// it. The buffers passed to the operation must stay valid and untouched until the Work is done.
// Waiting spins briefly, then sleeps. Destroying a Work does not cancel the operation.
//
// wait() without a timeout on an operation that is still queued (the communicator's thread has
// not started it) runs it on the waiting thread, with those queued before it, when no other
// thread is executing one: "start, then wait" then costs no thread hand-off.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "weft/export.h"
#include "weft/status.h"

namespace weft {

class WEFT_API Work {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~Work() = default;

  // True once the operation has finished, successfully or not. Never blocks.
  virtual bool test() const = 0;
  // Waits until the operation finishes or `timeout` passes, and returns its status. A wait that
  // times out returns ErrorCode::timeout but leaves the operation running (the operation's own
  // timeout, Options::timeout, still bounds it).
  virtual Status wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) = 0;
  // The final status; ok while still running.
  virtual Status status() const = 0;
  // When the operation started executing and when it finished (zero until then).
  virtual Clock::time_point start_time() const = 0;
  virtual Clock::time_point end_time() const = 0;
  // Collectives: has `fn` called once, with the final status, by the thread that finishes the
  // operation (the communicator's thread, or a thread that ran it in wait()), or at once on this
  // thread when it has finished already; returns true. `fn` runs inside the communicator's
  // progress: it must be short and must not wait on this communicator's operations. Call it at
  // most once per Work. Point-to-point operations complete in the transport: they return false
  // and never call `fn` (wait or test them instead).
  virtual bool on_done(std::function<void(const Status&)> fn) {
    (void)fn;
    return false;
  }
  // The sending rank of a completed receive (useful after one from kAnySource); -1 for other
  // operations and before completion.
  virtual int source() const { return -1; }
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace weft
