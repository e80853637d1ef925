// Alarm: a kernel timer one thread sleeps on and any thread sets.
//
// The communicator's executor sleeps on it while idle. A submitter that queues work sets it a
// short delay ahead instead of waking the executor at once: a caller that waits for its
// operation right away runs it itself before the delay ends (Work::wait), so the executor's wake,
// a context switch that costs more than a small collective on a loaded machine, is spared; a
// caller that goes on computing has its operation started by the executor when the delay ends.
#pragma once

#include <chrono>

#include "base/fd.h"
#include "weft/status.h"

namespace weft {

class Alarm {
 public:
  static Result<Alarm> create();

  // Any thread: the sleeper wakes `delay` from now (at once for zero); replaces an earlier
  // setting.
  void set(std::chrono::nanoseconds delay);
  // Sleeps until the alarm goes off (at once if it went off since the last sleep) and clears it.
  void sleep();

 private:
  Fd fd_;  // timerfd
};

}  // namespace weft
