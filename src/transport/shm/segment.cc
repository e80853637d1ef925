#include "transport/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>

#include "base/fd.h"
#include "base/log.h"

namespace weft::shm {
namespace {

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

void ring(SegmentHeader& h) {
  h.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (h.sleepers.load(std::memory_order_seq_cst) != 0) futex(&h.doorbell, FUTEX_WAKE, INT_MAX, nullptr);
}

void futex_wait(SegmentHeader& h, uint32_t seen, int64_t ns) {
  if (ns <= 0) return;
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  futex(&h.doorbell, FUTEX_WAIT, seen, &ts);
}

Segment::~Segment() {
  unlink();
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void Segment::unlink() {
  if (linked_) {
    ::shm_unlink(name_.c_str());
    linked_ = false;
  }
}

size_t Segment::slot_offset(int sender) const {
  const size_t index = static_cast<size_t>(sender < owner_ ? sender : sender - 1);
  return kPage + 2 * kSharedSlotBytes + index * (kPage + ring_bytes_);
}

SharedSlot& Segment::shared_slot(int parity) const {
  return *reinterpret_cast<SharedSlot*>(static_cast<uint8_t*>(base_) + kPage +
                                        static_cast<size_t>(parity & 1) * kSharedSlotBytes);
}

RingCtl& Segment::ctl(int sender) const {
  return *reinterpret_cast<RingCtl*>(static_cast<uint8_t*>(base_) + slot_offset(sender));
}

uint8_t* Segment::ring(int sender) const {
  return static_cast<uint8_t*>(base_) + slot_offset(sender) + kPage;
}

Result<std::unique_ptr<Segment>> Segment::create(const std::string& name, int rank, int size,
                                                 uint64_t token, size_t ring_bytes) {
  const size_t bytes = segment_bytes(size, ring_bytes);
  Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return Status(ErrorCode::io, fmt::format("rank {}: cannot create shared-memory segment {}: {}",
                                             rank, name, std::strerror(errno)));
  }
  auto seg = std::make_unique<Segment>();
  seg->name_ = name;
  seg->linked_ = true;
  seg->owner_ = rank;
  seg->ring_bytes_ = ring_bytes;
  auto too_small = [&](const char* what) {
    struct statvfs vfs {};
    std::string have = "unknown";
    if (::fstatvfs(fd.get(), &vfs) == 0) {
      have = fmt::format("{} free of {}", mib(uint64_t{vfs.f_bavail} * vfs.f_frsize),
                         mib(uint64_t{vfs.f_blocks} * vfs.f_frsize));
    }
    return Status(ErrorCode::io,
                  fmt::format("rank {}: /dev/shm is too small ({}: {}): rank {} needs {} for its "
                              "segment ({} peers x {} ring), the {} ranks of this host {} in all; "
                              "give the container more shared memory (docker --shm-size), lower "
                              "WEFT_SHM_RING_BYTES, or set WEFT_TRANSPORT=tcp",
                              rank, what, have, rank, mib(bytes), size - 1, mib(ring_bytes), size,
                              mib(uint64_t{bytes} * static_cast<uint64_t>(size))));
  };
  struct statvfs vfs {};
  if (::fstatvfs(fd.get(), &vfs) == 0 && uint64_t{vfs.f_bavail} * vfs.f_frsize < bytes) {
    return too_small("not enough free space");
  }
  if (int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0) {
    if (err == ENOSPC) return too_small("allocation failed");
    return Status(ErrorCode::io, fmt::format("rank {}: cannot size shared-memory segment {}: {}",
                                             rank, name, std::strerror(err)));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (base == MAP_FAILED) {
    return Status(ErrorCode::io, fmt::format("rank {}: cannot map shared-memory segment {}: {}",
                                             rank, name, std::strerror(errno)));
  }
  seg->base_ = base;
  seg->bytes_ = bytes;
  // Write every page now: on the VMs weft runs on, the first write to a page is expensive even
  // when the kernel has already allocated it (docs/algorithms.md, "Measured facts the code is
  // built on"), which would land on the first messages instead.
  std::memset(base, 0, bytes);
  auto* h = new (base) SegmentHeader();
  h->version = kSegmentVersion;
  h->rank = rank;
  h->size = size;
  h->pid = static_cast<int32_t>(::getpid());
  h->token = token;
  h->ring_bytes = ring_bytes;
  for (int s = 0; s < size; ++s) {
    if (s != rank) new (&seg->ctl(s)) RingCtl();
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  return seg;
}

Result<std::unique_ptr<Segment>> Segment::open(const std::string& name, int rank, int size,
                                               uint64_t token, size_t ring_bytes) {
  const size_t bytes = segment_bytes(size, ring_bytes);
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) {
    return Status(ErrorCode::io,
                  fmt::format("cannot open rank {}'s shared-memory segment {}: {} (is /dev/shm "
                              "shared by all ranks of the host? set WEFT_TRANSPORT=tcp or give "
                              "each host its own WEFT_HOST_ID otherwise)",
                              rank, name, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    return Status(ErrorCode::protocol,
                  fmt::format("rank {}'s shared-memory segment {} has {} bytes, expected {}", rank,
                              name, static_cast<long long>(st.st_size), bytes));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (base == MAP_FAILED) {
    return Status(ErrorCode::io, fmt::format("cannot map rank {}'s shared-memory segment {}: {}",
                                             rank, name, std::strerror(errno)));
  }
  auto seg = std::make_unique<Segment>();
  seg->name_ = name;
  seg->base_ = base;
  seg->bytes_ = bytes;
  seg->owner_ = rank;
  seg->ring_bytes_ = ring_bytes;
  const SegmentHeader& h = seg->header();
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h.magic != kSegmentMagic || h.version != kSegmentVersion || h.rank != rank ||
      h.size != size || h.token != token || h.ring_bytes != ring_bytes) {
    return Status(ErrorCode::protocol,
                  fmt::format("rank {}'s shared-memory segment {} does not belong to this "
                              "communicator (magic {:x}, version {}, rank {}, size {})",
                              rank, name, h.magic, h.version, h.rank, h.size));
  }
  return seg;
}

namespace {

// Unlinks every weft segment in /dev/shm (weft-<16 hex token>-<rank>-<pid>) whose owner pid
// `gone` says is no longer there; `why` ends the log line. Returns how many were removed.
template <typename Gone>
int remove_segments_if(Gone gone, const char* why) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(dir)) {
    unsigned long long token = 0;
    int rank = 0, pid = 0, end = 0;
    if (std::sscanf(e->d_name, "weft-%16llx-%d-%d%n", &token, &rank, &pid, &end) != 3 ||
        e->d_name[end] != '\0' || pid <= 0 || !gone(static_cast<pid_t>(pid))) {
      continue;
    }
    if (::shm_unlink((std::string("/") + e->d_name).c_str()) == 0) {
      log::info("removed stale shared-memory segment /dev/shm/{} (process {} {})", e->d_name, pid,
                why);
      ++removed;
    }
  }
  ::closedir(dir);
  return removed;
}

}  // namespace

int remove_stale_segments() {
  return remove_segments_if([](pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; },
                            "is gone");
}

int remove_segments_of(std::span<const pid_t> exited) {
  if (exited.empty()) return 0;
  return remove_segments_if(
      [&](pid_t pid) { return std::find(exited.begin(), exited.end(), pid) != exited.end(); },
      "has exited");
}

}  // namespace weft::shm

namespace weft {

int remove_shm_segments_of(std::span<const pid_t> exited) { return shm::remove_segments_of(exited); }

}  // namespace weft
