// LineRelay: copies one rank's output stream to the launcher's stdout or stderr, one whole line
// at a time, each prefixed with "[rank] ". Partial lines wait in the buffer until their newline
// arrives or the stream ends, so the lines of different ranks never interleave mid-line.
// Owned and called by the launcher's single event-loop thread.
#pragma once

#include <string>
#include <string_view>

namespace weft::launcher {

class LineRelay {
 public:
  LineRelay(int rank, int out_fd);
  // Lines prefixed "[label] " (a helper process beside the ranks, e.g. "ps1").
  LineRelay(const std::string& label, int out_fd);

  // Takes bytes just read from the rank; writes out every line they complete.
  void feed(std::string_view bytes);
  // The stream ended: writes out a final partial line (with a newline added).
  void finish();

 private:
  void emit(std::string_view line);  // line without its newline

  std::string prefix_;
  int out_fd_;
  std::string partial_;
  std::string scratch_;      // reused for prefix + line + newline, so each line is one write()
  bool out_broken_ = false;  // writing failed (e.g. EPIPE): drop further output
};

// Writes all of `bytes` to `fd`, retrying on EINTR and short writes and waiting with poll() when
// `fd` is non-blocking and full. Returns false (errno set) on any other error.
bool write_all(int fd, std::string_view bytes);

}  // namespace weft::launcher
