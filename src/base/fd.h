// Fd: a move-only owner of a file descriptor; closes it on destruction.
#pragma once

#include <string>
#include <utility>

#include "weft/status.h"

namespace weft {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

// Status for a failed system call: "<what>: <strerror(errno)>" with code io.
Status errno_status(const std::string& what);
Status errno_status(const std::string& what, int err);

}  // namespace weft
