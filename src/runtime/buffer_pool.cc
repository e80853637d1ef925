#include "runtime/buffer_pool.h"

#include <sys/mman.h>

#include <bit>
#include <cstdlib>
#include <new>

namespace weft {
namespace {

constexpr size_t kMinClassBytes = 64;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMaxBufferBytes = size_t{1} << 52;

// nullptr when memory is exhausted.
void* allocate(size_t class_bytes) {
  const size_t align = class_bytes >= kHugePage ? kHugePage : 64;
  void* p = nullptr;
  if (posix_memalign(&p, align, class_bytes) != 0) return nullptr;
  if (class_bytes >= kHugePage) {
    // Best effort: fewer page faults on first touch. Failure only costs speed.
    (void)madvise(p, class_bytes, MADV_HUGEPAGE);
  }
  return p;
}

}  // namespace

BufferPool::BufferPool(size_t max_per_class, size_t max_cached_bytes)
    : max_per_class_(max_per_class), max_cached_bytes_(max_cached_bytes) {}

BufferPool::~BufferPool() { trim(); }

size_t BufferPool::class_size(size_t bytes) {
  if (bytes <= kMinClassBytes) return kMinClassBytes;
  return std::bit_ceil(bytes);
}

int BufferPool::class_index(size_t bytes) { return std::countr_zero(class_size(bytes)); }

void* BufferPool::acquire(size_t bytes) {
  void* p = try_acquire(bytes);
  if (p == nullptr && bytes != 0) std::abort();
  return p;
}

void* BufferPool::try_acquire(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Beyond any address space (user space is 47-52 bits on x86-64 and arm64): refused here, not
  // by the allocator (sanitizer allocators abort on such requests instead of failing them).
  if (bytes > kMaxBufferBytes) return nullptr;
  const int idx = class_index(bytes);
  {
    MutexLock lock(mu_);
    auto& list = free_[idx];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      cached_bytes_ -= class_size(bytes);
      return p;
    }
  }
  return allocate(class_size(bytes));
}

void BufferPool::release(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t size = class_size(bytes);
  {
    MutexLock lock(mu_);
    auto& list = free_[class_index(bytes)];
    if (list.size() < max_per_class_ && cached_bytes_ + size <= max_cached_bytes_) {
      list.push_back(ptr);
      cached_bytes_ += size;
      return;
    }
  }
  std::free(ptr);
}

size_t BufferPool::cached_bytes() const {
  MutexLock lock(mu_);
  return cached_bytes_;
}

void BufferPool::trim() {
  std::array<std::vector<void*>, kClasses> victims;
  {
    MutexLock lock(mu_);
    victims.swap(free_);
    cached_bytes_ = 0;
  }
  for (auto& list : victims) {
    for (void* p : list) std::free(p);
  }
}

}  // namespace weft
