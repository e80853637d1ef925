#include "runtime/completion.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>
#include <thread>

namespace weft {
namespace {

// Spin this long before sleeping: long enough to catch a reply on a quiet loopback link,
// short enough not to steal a core from the peer that must produce it.
constexpr auto kSpin = std::chrono::microseconds(20);

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

}  // namespace

Completion::~Completion() {
  while (notifying_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void Completion::notify() {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) {
    futex(&generation_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  }
  int fd = poll_fd_.load(std::memory_order_seq_cst);
  if (fd >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
  }
}

bool Completion::wait_for_change(uint32_t seen, Clock::time_point deadline) {
  const auto spin_until = Clock::now() + kSpin;
  while (Clock::now() < spin_until) {
    if (generation_.load(std::memory_order_acquire) != seen) return true;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  while (generation_.load(std::memory_order_acquire) == seen) {
    auto now = Clock::now();
    if (now >= deadline) return false;
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
    // Wake at least every 100 ms so a deadline far away never depends on one futex call.
    left = std::min(left, std::chrono::nanoseconds(std::chrono::milliseconds(100)));
    timespec ts{static_cast<time_t>(left.count() / 1000000000),
                static_cast<long>(left.count() % 1000000000)};
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (generation_.load(std::memory_order_seq_cst) == seen) {
      futex(&generation_, FUTEX_WAIT_PRIVATE, seen, &ts);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
  return true;
}

}  // namespace weft
