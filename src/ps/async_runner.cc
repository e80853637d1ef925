// AsyncRunner and PsWork: the Work of a parameter-server call run on the client's thread.
#include "async_runner.h"

#include <fmt/format.h>

namespace weft::ps {

class PsWork final : public Work {
 public:
  bool test() const override {
    MutexLock lock(mu_);
    return done_;
  }

  Status wait(std::chrono::milliseconds timeout) override {
    MutexUniqueLock lock(mu_);
    auto done = [this]() REQUIRES(mu_) { return done_; };
    if (timeout == std::chrono::milliseconds::max()) {
      changed_.wait(lock.native(), done);
    } else if (!changed_.wait_for(lock.native(), timeout, done)) {
      return Status(ErrorCode::timeout,
                    fmt::format("parameter-server call still running after {} ms of waiting "
                                "(it goes on)",
                                timeout.count()));
    }
    return status_;
  }

  Status status() const override {
    MutexLock lock(mu_);
    return status_;
  }
  Clock::time_point start_time() const override {
    MutexLock lock(mu_);
    return start_;
  }
  Clock::time_point end_time() const override {
    MutexLock lock(mu_);
    return end_;
  }

  bool on_done(std::function<void(const Status&)> fn) override {
    Status final_status;
    {
      MutexLock lock(mu_);
      if (!final_) {
        callback_ = std::move(fn);
        return true;
      }
      final_status = status_;
    }
    fn(final_status);
    return true;
  }

  void started() {
    MutexLock lock(mu_);
    start_ = Clock::now();
  }

  // The callback runs before the Work is done, so a wait() that returns has seen its effects.
  void finish(Status s) {
    std::function<void(const Status&)> callback;
    {
      MutexLock lock(mu_);
      status_ = s;
      final_ = true;
      callback = std::move(callback_);
    }
    if (callback) callback(s);
    {
      MutexLock lock(mu_);
      done_ = true;
      end_ = Clock::now();
    }
    changed_.notify_all();
  }

 private:
  mutable Mutex mu_;
  std::condition_variable changed_;
  bool final_ GUARDED_BY(mu_) = false;  // status_ is the final one (on_done calls at once)
  bool done_ GUARDED_BY(mu_) = false;
  Status status_ GUARDED_BY(mu_);
  Clock::time_point start_ GUARDED_BY(mu_){}, end_ GUARDED_BY(mu_){};
  std::function<void(const Status&)> callback_ GUARDED_BY(mu_);
};

AsyncRunner::~AsyncRunner() {
  std::thread thread;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  queued_.notify_all();
  if (thread.joinable()) thread.join();
}

WorkPtr AsyncRunner::submit(std::function<Status()> op) {
  auto work = std::make_shared<PsWork>();
  {
    MutexLock lock(mu_);
    queue_.emplace_back(std::move(op), work);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  queued_.notify_one();
  return work;
}

void AsyncRunner::loop() {
  for (;;) {
    std::pair<std::function<Status()>, std::shared_ptr<PsWork>> next;
    {
      MutexUniqueLock lock(mu_);
      queued_.wait(lock.native(), [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next.second->started();
    next.second->finish(next.first());
  }
}

}  // namespace weft::ps
