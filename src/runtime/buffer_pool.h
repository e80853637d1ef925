// BufferPool: large scratch and staging buffers reused across operations.
//
// Why: the first touch of a fresh page is expensive on the machines weft runs on
// (docs/algorithms.md, "Measured facts the code is built on"), so allocating message-sized
// buffers per call ruins large-message bandwidth. The pool keeps freed
// buffers by power-of-two size class and hands them out again.
//
// Buffers are 64-byte aligned; classes of 2 MiB and more are 2 MiB aligned and advised for
// transparent huge pages. Retention is bounded: at most `max_per_class` free buffers per class and
// `max_cached_bytes` in all; what does not fit is freed at once.
//
// Threads: every method may be called from any thread. acquire() never returns memory that is
// still handed out. release() must get the pointer and the byte count acquire() was called with.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "base/mutex.h"

namespace weft {

class BufferPool {
 public:
  static constexpr size_t kDefaultMaxPerClass = 4;
  static constexpr size_t kDefaultMaxCachedBytes = size_t{1} << 30;

  explicit BufferPool(size_t max_per_class = kDefaultMaxPerClass,
                      size_t max_cached_bytes = kDefaultMaxCachedBytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `bytes` bytes, not zeroed. nullptr for 0 bytes; aborts the process when
  // memory is exhausted (as operator new would): for buffers bounded by the options (eager
  // staging within the credit).
  void* acquire(size_t bytes);
  // The same, but nullptr when memory is exhausted: for buffers sized by the caller's data
  // (collective scratch), whose failure is the operation's error.
  void* try_acquire(size_t bytes);
  // Gives back a buffer from acquire(ptr's byte count). nullptr is ignored.
  void release(void* ptr, size_t bytes);

  // Bytes held in free buffers (for tests and diagnostics).
  size_t cached_bytes() const;
  // Frees every cached buffer.
  void trim();

  // The size actually allocated for a request of `bytes` (its class size).
  static size_t class_size(size_t bytes);

 private:
  static constexpr int kClasses = 64;
  static int class_index(size_t bytes);

  const size_t max_per_class_;
  const size_t max_cached_bytes_;
  mutable Mutex mu_;  // a leaf
  std::array<std::vector<void*>, kClasses> free_ GUARDED_BY(mu_);
  size_t cached_bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace weft
