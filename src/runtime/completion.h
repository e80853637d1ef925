// Completion: a futex word that one thread sleeps on while other threads finish work for it.
//
// The transport calls notify() whenever a request it holds is done; the poster loops on
// "is what I wait for done? if not, wait_for_change()" . Waiting spins briefly, then sleeps on the
// futex, so oversubscribed jobs (more ranks than cores) do not collapse.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "base/clock.h"

namespace weft {

class Completion {
 public:
  using Clock = weft::Clock;

  // The owner destroys a Completion only once what it waits for is done; a notifier may still be
  // inside notify() then, so the destructor waits for notifiers in flight to leave.
  ~Completion();

  // Any thread. Wakes the waiter.
  void notify();
  // Bracket "mark done + notify" so the destructor can wait for the notifier to finish.
  void begin_notify() { notifying_.fetch_add(1, std::memory_order_seq_cst); }
  void end_notify() { notifying_.fetch_sub(1, std::memory_order_release); }
  // Returns the counter to pass to wait_for_change (read it before checking the condition).
  uint32_t generation() const { return generation_.load(std::memory_order_acquire); }
  // A waiter that sleeps in poll() instead of on the futex registers an eventfd here; notify()
  // then also writes to it. -1 when none.
  void set_poll_fd(int fd) { poll_fd_.store(fd, std::memory_order_seq_cst); }

  // Sleeps until notify() was called after `seen` was read, or `deadline` passed.
  // Returns false on deadline.
  bool wait_for_change(uint32_t seen, Clock::time_point deadline);

 private:
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint32_t> notifying_{0};
  std::atomic<int> poll_fd_{-1};
};

}  // namespace weft
