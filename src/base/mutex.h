// Mutexes the thread-safety analysis understands (base/thread_annotations.h): thin wrappers of
// std::mutex and std::shared_mutex whose members are all inline, so the code is that of the
// standard types (a MutexLock is a std::lock_guard, a MutexUniqueLock a std::unique_lock).
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void bump() EXCLUDES(mu_) { MutexLock lock(mu_); ++count_; }
//
// With a condition variable, hold the mutex through a MutexUniqueLock and give the variable its
// native() std::unique_lock; a predicate that reads guarded fields says so:
//   MutexUniqueLock lock(mu_);
//   cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return count_ > 0; });
//
// Mutex has lock()/unlock(), so std::unique_lock<Mutex> works where the analysis cannot follow
// anyway: a vector of locks taken in a loop, in a function marked NO_THREAD_SAFETY_ANALYSIS.
#pragma once

#include <mutex>
#include <shared_mutex>

#include "base/thread_annotations.h"

namespace weft {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds this mutex where it cannot see it (a callback run
  // by code that took the lock, e.g. Matcher::post_any's on_match). Checks nothing at run time.
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class MutexUniqueLock;
  std::mutex mu_;
};

// Holds `mu` for its scope (std::lock_guard).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// std::unique_lock for a Mutex: may be unlocked and locked again within its scope, and native()
// is what a std::condition_variable waits with (the analysis sees the mutex held across the wait,
// as it is when the wait returns).
class SCOPED_CAPABILITY MutexUniqueLock {
 public:
  explicit MutexUniqueLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  // Not locked yet: lock() or try_lock() it.
  MutexUniqueLock(Mutex& mu, std::defer_lock_t) EXCLUDES(mu) : lock_(mu.mu_, std::defer_lock) {}
  ~MutexUniqueLock() RELEASE() {}
  MutexUniqueLock(const MutexUniqueLock&) = delete;
  MutexUniqueLock& operator=(const MutexUniqueLock&) = delete;

  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return lock_.try_lock(); }

  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// std::shared_mutex: one writer or any number of readers.
class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively for its scope (std::unique_lock<std::shared_mutex>).
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterMutexLock() RELEASE() { mu_.unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds `mu` shared for its scope (std::shared_lock<std::shared_mutex>).
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderMutexLock() RELEASE_GENERIC() { mu_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace weft
