// Reactor: one thread running an epoll loop, plus a queue of tasks to run on that thread.
//
// Handlers are registered per fd and called on the reactor thread only; a handler must not block.
// post() queues a task from any thread (woken through an eventfd); run_sync() queues one and waits
// for it, or runs it inline when called on the reactor thread itself. The reactor never throws.
// Destruction stops the thread after the tasks already queued have run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/fd.h"
#include "base/mutex.h"
#include "weft/status.h"

namespace weft {

class Reactor {
 public:
  using Handler = std::function<void(uint32_t events)>;

  static Result<std::unique_ptr<Reactor>> create(std::string name);
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Registers fd with the given epoll events (EPOLLET is the caller's choice). The handler runs on
  // the reactor thread. Call remove() before closing the fd.
  Status add(int fd, uint32_t events, Handler handler);
  // Changes the events of a registered fd; any thread.
  Status modify(int fd, uint32_t events);
  // Unregisters fd. Must run on the reactor thread (use run_sync from elsewhere).
  void remove(int fd);

  void post(std::function<void()> task) EXCLUDES(tasks_mu_);
  void run_sync(const std::function<void()>& task) EXCLUDES(tasks_mu_);
  bool on_reactor_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  Reactor() = default;
  void loop();
  void run_tasks() EXCLUDES(tasks_mu_);

  Fd epoll_;
  Fd wake_;  // eventfd
  std::jthread thread_;  // joined by the destructor once it has stopped the loop
  std::string name_;
  bool stopping_ = false;  // reactor thread only

  Mutex tasks_mu_;  // a leaf
  std::vector<std::function<void()>> tasks_ GUARDED_BY(tasks_mu_);

  // fd -> handler; touched only on the reactor thread (add() posts itself there when needed).
  std::unordered_map<int, std::shared_ptr<Handler>> handlers_;
};

}  // namespace weft
