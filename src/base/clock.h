// The clock weft measures with, and a cheap coarse reading of it.
//
// Clock is std::chrono::steady_clock: every deadline, timeout and duration in weft is on it, so
// time points from any module compare. Wall-clock time appears only in logs and flight records
// that say so.
#pragma once

#include <time.h>

#include <chrono>

namespace weft {

using Clock = std::chrono::steady_clock;

// Clock's time from CLOCK_MONOTONIC_COARSE (the same clock, advanced once per tick, 1-4 ms on
// Linux): a few nanoseconds instead of tens for a precise read, which matters on the path of an
// 8-byte collective. Good for what is about seconds: flight-record stamps and the deadlines of
// blocking calls.
inline Clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace weft
