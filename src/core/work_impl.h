// WorkImpl: the Work handed out by the communicator.
//
// A collective's Work is finished by the thread that executed it (finish()). A point-to-point
// Work owns its transport Request: it is done when the transport completes the request, and its
// deadline (post time + Options::timeout) is enforced by whoever waits or tests.
//
// A Work queued behind other operations holds its communicator's QueueRunner: wait() without a
// timeout runs the queue through its operation on the waiting thread when no other thread is
// executing one (CommunicatorImpl::run_queued_through).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "base/mutex.h"
#include "runtime/completion.h"
#include "transport/transport.h"
#include "weft/work.h"

namespace weft {

class CommunicatorImpl;

// Shared by a communicator and its queued Works, so that a Work may outlive the communicator:
// `impl` is cleared (exclusively) by shutdown once nothing can be queued any more.
struct QueueRunner {
  explicit QueueRunner(CommunicatorImpl* communicator) : impl(communicator) {}
  SharedMutex mu;
  CommunicatorImpl* impl GUARDED_BY(mu);
};

class WorkImpl final : public Work {
 public:
  explicit WorkImpl(bool point_to_point = false) : point_to_point_(point_to_point) {}

  // Called when a point-to-point deadline passes: fails the communicator, returns the error.
  using OnDeadline = std::function<Status(const WorkImpl&)>;

  bool test() const override;
  Status wait(std::chrono::milliseconds timeout) override;
  Status status() const override;
  bool on_done(std::function<void(const Status&)> fn) EXCLUDES(done_mu_) override;
  Clock::time_point start_time() const override { return start_; }
  Clock::time_point end_time() const override { return end_; }
  int source() const override {
    const bool receive =
        posted_.load(std::memory_order_acquire) && req_.kind == Request::Kind::recv;
    return receive && test() && status().ok() ? req_.peer : -1;
  }

  // Set by the communicator when it queues the operation (see QueueRunner).
  void set_runner(std::shared_ptr<QueueRunner> runner) { runner_ = std::move(runner); }

  // Collective side.
  void mark_started() { start_ = Clock::now(); }
  void mark_started(Clock::time_point t) { start_ = t; }
  void finish(Status st) { finish(std::move(st), Clock::now()); }
  // Reading the clock costs tens of nanoseconds on the VMs weft runs on: callers that already
  // hold the time pass it.
  void finish(Status st, Clock::time_point end) EXCLUDES(done_mu_);

  // Point-to-point side: the request lives here; arm() before posting it.
  Request& request() { return req_; }
  void arm_p2p(Clock::time_point deadline, OnDeadline on_deadline);
  Clock::time_point deadline() const { return deadline_; }

 private:
  // A point-to-point request armed and posted (arm_p2p): from then on its Request, not
  // done_, says when it is done. Other threads may be testing meanwhile.
  std::atomic<bool> posted_{false};
  Request req_;
  Completion completion_;
  std::atomic<bool> done_{false};
  Status status_;  // written before done_ is set
  Clock::time_point start_{};
  Clock::time_point end_{};
  Clock::time_point deadline_ = Clock::time_point::max();
  OnDeadline on_deadline_;
  mutable std::atomic<bool> end_recorded_{false};
  const bool point_to_point_;
  std::shared_ptr<QueueRunner> runner_;
  Mutex done_mu_;  // orders on_done() against finish()
  bool finished_ GUARDED_BY(done_mu_) = false;
  std::function<void(const Status&)> on_done_ GUARDED_BY(done_mu_);
};

}  // namespace weft
