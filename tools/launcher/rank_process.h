// RankProcess: one rank of a `weft run` job, a child process started with fork and exec (the
// child makes only async-signal-safe calls: the launcher already runs the store server's thread)
// that dies with the launcher (a parent-death signal, SIGKILL), in a process group of its own, with
// its stdout and stderr connected to non-blocking pipes the launcher reads, and a pidfd that
// becomes readable when the child exits. Move-only; the launcher's event loop owns every one.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "weft/status.h"

namespace weft::launcher {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // the complete environment, "NAME=value"
  bool inherit_stdin = false;     // otherwise stdin is /dev/null
  int keep_fd = -1;  // a descriptor the program inherits at its number (others are close-on-exec)
  sigset_t signal_mask;           // the mask the child starts with (the launcher blocks some)
  sigset_t default_signals;       // reset to SIG_DFL in the child (those the launcher ignores)
};

// How a child ended, decoded from its wait status.
struct ExitInfo {
  bool signaled = false;  // killed by a signal (then `signal` is set), else exited (`code`)
  int code = 0;
  int signal = 0;
  bool core_dumped = false;

  bool success() const { return !signaled && code == 0; }
  // The shell convention: the exit code, or 128 + the signal number.
  int shell_code() const { return signaled ? 128 + signal : code; }
  // "exit 3", "killed by signal 9 (SIGKILL)", "killed by signal 11 (SIGSEGV, core dumped)".
  std::string describe() const;
};

class RankProcess {
 public:
  static Result<RankProcess> spawn(const SpawnRequest& request);

  RankProcess(RankProcess&&) = default;
  RankProcess& operator=(RankProcess&&) = default;

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  Fd& stdout_pipe() { return out_; }  // read ends; reset() them when the stream ends
  Fd& stderr_pipe() { return err_; }

  // Sends `sig` to the child's process group (so helpers it started get it too); falls back to
  // the child alone if it left its group. Does nothing once the child has been reaped.
  void signal_group(int sig);
  // Collects the exit status if the child has exited (call when the pidfd is readable).
  Result<std::optional<ExitInfo>> try_reap();
  bool reaped() const { return reaped_; }

 private:
  RankProcess(pid_t pid, Fd pidfd, Fd out, Fd err)
      : pid_(pid), pidfd_(std::move(pidfd)), out_(std::move(out)), err_(std::move(err)) {}

  pid_t pid_ = -1;
  Fd pidfd_;
  Fd out_;
  Fd err_;
  bool reaped_ = false;
};

}  // namespace weft::launcher
