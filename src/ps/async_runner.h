// AsyncRunner: the thread behind a Client's *_async calls. Operations run one after another in
// call order (like a communicator's stream) on one thread the runner starts at the first
// submit; each has a Work (weft/work.h) that completes when its operation has run. Destroying the
// runner runs what is queued, then joins the thread. submit() may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "base/mutex.h"
#include "weft/status.h"
#include "weft/work.h"

namespace weft::ps {

class PsWork;

class AsyncRunner {
 public:
  AsyncRunner() = default;
  ~AsyncRunner();
  AsyncRunner(const AsyncRunner&) = delete;
  AsyncRunner& operator=(const AsyncRunner&) = delete;

  // Queues `op`; its Status becomes the Work's.
  WorkPtr submit(std::function<Status()> op) EXCLUDES(mu_);

 private:
  void loop() EXCLUDES(mu_);

  Mutex mu_;
  std::condition_variable queued_;
  std::deque<std::pair<std::function<Status()>, std::shared_ptr<PsWork>>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);  // started by the first submit
};

}  // namespace weft::ps
