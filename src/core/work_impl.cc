#include "core/work_impl.h"

#include "core/communicator_impl.h"

namespace weft {

void WorkImpl::finish(Status st, Clock::time_point end) {
  status_ = std::move(st);
  end_ = end;
  completion_.begin_notify();
  done_.store(true, std::memory_order_release);
  completion_.notify();
  completion_.end_notify();
  std::function<void(const Status&)> fn;
  {
    MutexLock lock(done_mu_);
    finished_ = true;
    fn = std::move(on_done_);
  }
  // Called (and dropped: it may hold what holds this Work) here, by the finishing thread.
  if (fn) fn(status_);
}

bool WorkImpl::on_done(std::function<void(const Status&)> fn) {
  if (point_to_point_ || !fn) return false;
  {
    MutexLock lock(done_mu_);
    if (!finished_) {
      on_done_ = std::move(fn);
      return true;
    }
  }
  fn(status_);
  return true;
}

void WorkImpl::arm_p2p(Clock::time_point deadline, OnDeadline on_deadline) {
  start_ = Clock::now();
  deadline_ = deadline;
  on_deadline_ = std::move(on_deadline);
  req_.completion = &completion_;
  posted_.store(true, std::memory_order_release);  // publishes the fields above
  // A thread that waited while this was queued sleeps without the deadline: let it read it.
  completion_.notify();
}

bool WorkImpl::test() const {
  if (posted_.load(std::memory_order_acquire)) return req_.done();
  return done_.load(std::memory_order_acquire);
}

Status WorkImpl::status() const {
  if (posted_.load(std::memory_order_acquire)) return req_.done() ? req_.status : Status();
  return done_.load(std::memory_order_acquire) ? status_ : Status();
}

Status WorkImpl::wait(std::chrono::milliseconds timeout) {
  if (!posted_.load(std::memory_order_acquire) && done_.load(std::memory_order_acquire)) {
    return status_;  // the blocking case
  }
  const bool unbounded = timeout == std::chrono::milliseconds::max() || timeout.count() < 0;
  if (unbounded && runner_ && !test()) {
    // Still queued, perhaps: run it here rather than wake the executor and sleep. (Not under a
    // timeout: running it could outlast the timeout.)
    ReaderMutexLock lock(runner_->mu);
    if (runner_->impl != nullptr) runner_->impl->run_queued_through(this);
  }
  auto user_deadline = unbounded ? Clock::time_point::max() : Clock::now() + timeout;
  while (true) {
    uint32_t gen = completion_.generation();
    if (test()) break;
    // Queued point-to-point operations get their deadline when posted (arm_p2p wakes this).
    const bool posted = posted_.load(std::memory_order_acquire);
    auto limit = std::min(user_deadline, posted ? deadline_ : Clock::time_point::max());
    if (!completion_.wait_for_change(gen, limit)) {
      if (test()) break;
      if (posted && Clock::now() >= deadline_ && on_deadline_) {
        // The operation's own timeout: the communicator fails, which completes the request.
        (void)on_deadline_(*this);
        continue;
      }
      if (Clock::now() >= user_deadline) {
        return Status(ErrorCode::timeout, "Work::wait: Timed out before the operation ended (it is still running)");
      }
    }
  }
  if (posted_.load(std::memory_order_acquire) && !end_recorded_.exchange(true)) end_ = Clock::now();
  return status();
}

}  // namespace weft
