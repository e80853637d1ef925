#include "runtime/alarm.h"

#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace weft {

Result<Alarm> Alarm::create() {
  Alarm a;
  a.fd_ = Fd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!a.fd_.valid()) return errno_status("timerfd_create (the executor's alarm)");
  return a;
}

void Alarm::set(std::chrono::nanoseconds delay) {
  // An it_value of zero disarms a timerfd: "at once" is one nanosecond.
  const int64_t ns = std::max<int64_t>(1, delay.count());
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  // Cannot fail with a valid descriptor and value.
  (void)::timerfd_settime(fd_.get(), 0, &spec, nullptr);
}

void Alarm::sleep() {
  pollfd p{fd_.get(), POLLIN, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  uint64_t expirations = 0;
  (void)!::read(fd_.get(), &expirations, sizeof expirations);  // clears it (EAGAIN: already)
}

}  // namespace weft
