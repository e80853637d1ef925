#include "tools/launcher/line_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace weft::launcher {

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n >= 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, -1) < 0 && errno != EINTR) return false;
      continue;
    }
    return false;
  }
  return true;
}

LineRelay::LineRelay(int rank, int out_fd) : LineRelay(std::to_string(rank), out_fd) {}

LineRelay::LineRelay(const std::string& label, int out_fd)
    : prefix_("[" + label + "] "), out_fd_(out_fd) {}

void LineRelay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      return;
    }
    if (partial_.empty()) {
      emit(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      emit(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineRelay::finish() {
  if (!partial_.empty()) {
    emit(partial_);
    partial_.clear();
  }
}

void LineRelay::emit(std::string_view line) {
  if (out_broken_) return;
  scratch_.clear();
  scratch_.reserve(prefix_.size() + line.size() + 1);
  scratch_.append(prefix_).append(line).push_back('\n');
  if (!write_all(out_fd_, scratch_)) out_broken_ = true;  // EPIPE, EBADF...: stop trying
}

}  // namespace weft::launcher
