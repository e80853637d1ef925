#include "tools/launcher/rank_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft::launcher {

namespace {

// A pipe whose read end is non-blocking (the launcher polls it) and whose write end blocks (the
// child writes to it as to any stdout). Both ends are close-on-exec in the launcher; the child's
// dup2 onto 1 or 2 clears the flag on its copy.
Status make_pipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_status("pipe2");
  read_end = Fd(fds[0]);
  write_end = Fd(fds[1]);
  int flags = ::fcntl(read_end.get(), F_GETFL);
  if (flags < 0 || ::fcntl(read_end.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return errno_status("fcntl(O_NONBLOCK)");
  }
  return Status::success();
}

// Debian 12's <sys/pidfd.h> lacks extern "C" (fixed in glibc 2.37), so call the kernel directly.
int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
int pidfd_send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// posix_spawn attribute and file-action objects with their destroy calls.
struct SpawnAttr {
  posix_spawnattr_t value;
  SpawnAttr() { posix_spawnattr_init(&value); }
  ~SpawnAttr() { posix_spawnattr_destroy(&value); }
};
struct SpawnActions {
  posix_spawn_file_actions_t value;
  SpawnActions() { posix_spawn_file_actions_init(&value); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&value); }
};

}  // namespace

std::string ExitInfo::describe() const {
  if (!signaled) return "exit " + std::to_string(code);
  const char* abbrev = ::sigabbrev_np(signal);
  std::string name = abbrev ? std::string("SIG") + abbrev : "unknown signal";
  if (core_dumped) name += ", core dumped";
  return "killed by signal " + std::to_string(signal) + " (" + name + ")";
}

Result<RankProcess> RankProcess::spawn(const SpawnRequest& request) {
  if (request.argv.empty()) return Status(ErrorCode::invalid_argument, "no program to run");
  Fd out_read, out_write, err_read, err_write;
  WEFT_RETURN_IF_ERROR(make_pipe(out_read, out_write));
  WEFT_RETURN_IF_ERROR(make_pipe(err_read, err_write));

  SpawnActions actions;
  if (!request.inherit_stdin) {
    posix_spawn_file_actions_addopen(&actions.value, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions.value, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions.value, err_write.get(), STDERR_FILENO);

  // Own process group (pgid = pid): terminal signals reach only the launcher, which forwards
  // them, and the launcher can signal a rank together with everything it started.
  SpawnAttr attr;
  posix_spawnattr_setflags(&attr.value,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr.value, 0);
  posix_spawnattr_setsigmask(&attr.value, &request.signal_mask);
  posix_spawnattr_setsigdefault(&attr.value, &request.default_signals);

  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions.value, &attr.value, argv.data(), envp.data());
  if (rc != 0) return errno_status("posix_spawnp(" + request.argv[0] + ")", rc);

  // The child cannot be reaped by anyone else before this, so the pid still names it.
  int pidfd = pidfd_open(pid);
  if (pidfd < 0) {
    Status st = errno_status("pidfd_open");
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return st;
  }
  return RankProcess(pid, Fd(pidfd), std::move(out_read), std::move(err_read));
}

void RankProcess::signal_group(int sig) {
  if (reaped_) return;
  if (::kill(-pid_, sig) != 0 && errno == ESRCH) {
    pidfd_send_signal(pidfd_.get(), sig);
  }
}

Result<std::optional<ExitInfo>> RankProcess::try_reap() {
  if (reaped_) return Status(ErrorCode::internal, "rank process reaped twice");
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return errno_status("waitpid(" + std::to_string(pid_) + ")");
  if (r == 0) return std::optional<ExitInfo>();  // still running (e.g. only stopped)
  reaped_ = true;
  pidfd_.reset();
  ExitInfo info;
  if (WIFSIGNALED(status)) {
    info.signaled = true;
    info.signal = WTERMSIG(status);
    info.core_dumped = WCOREDUMP(status);
  } else {
    info.code = WEXITSTATUS(status);
  }
  return std::optional<ExitInfo>(info);
}

}  // namespace weft::launcher
