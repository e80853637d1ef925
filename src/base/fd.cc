#include "base/fd.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status errno_status(const std::string& what, int err) {
  return Status(ErrorCode::io, what + ": " + std::strerror(err));
}

Status errno_status(const std::string& what) { return errno_status(what, errno); }

}  // namespace weft
