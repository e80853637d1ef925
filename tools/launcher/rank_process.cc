#include "tools/launcher/rank_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
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

// The paths to try for argv[0], as execvp would (looked up here, in the launcher, because the
// child may only make async-signal-safe calls): argv[0] itself when it names a path, else each
// PATH entry (an empty one is the current directory) joined with it.
std::vector<std::string> program_candidates(const std::string& name) {
  if (name.find('/') != std::string::npos) return {name};
  const char* path = ::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out.push_back((dir.empty() ? std::string(".") : dir) + "/" + name);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// The child's end when it cannot exec: the errno to the launcher, exit 127 (as a shell's).
[[noreturn]] void report_exec_failure(int report, int err) {
  [[maybe_unused]] ssize_t n = ::write(report, &err, sizeof(err));
  ::_exit(127);
}

// In the child between fork and exec: async-signal-safe calls only. Reports a failure as an
// errno through `report` (close-on-exec: the launcher reads EOF when the exec succeeded).
[[noreturn]] void exec_child(const SpawnRequest& request, pid_t launcher, int out_fd, int err_fd,
                             int report, const std::vector<char*>& candidates, char* const* argv,
                             char* const* envp) {
  auto fail = [report](int err) { report_exec_failure(report, err); };
  // Ends with the launcher, whatever kills it (SIGKILL included): a rank left behind would
  // hold its CPU, its ports and its peers until their timeouts. The parent may have died
  // before the signal was armed: then getppid() no longer names it.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);
  // Own process group (pgid = pid): terminal signals reach only the launcher, which forwards
  // them, and the launcher can signal a rank together with everything it started.
  if (::setpgid(0, 0) != 0) fail(errno);
  if (!request.inherit_stdin) {
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0) fail(errno);
  }
  if (::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0) fail(errno);
  if (request.keep_fd > STDERR_FILENO) {
    const int flags = ::fcntl(request.keep_fd, F_GETFD);
    if (flags < 0 || ::fcntl(request.keep_fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) fail(errno);
  }
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&request.default_signals, sig) == 1) ::signal(sig, SIG_DFL);
  }
  if (::sigprocmask(SIG_SETMASK, &request.signal_mask, nullptr) != 0) fail(errno);
  // As execvp: the first candidate that runs; EACCES wins over "not found" when nothing does.
  int err = ENOENT;
  for (char* path : candidates) {
    ::execve(path, argv, envp);
    if (errno == EACCES) err = EACCES;
    else if (errno != ENOENT && errno != ENOTDIR) err = errno;
  }
  report_exec_failure(report, err);
}

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

  std::vector<std::string> paths = program_candidates(request.argv[0]);
  std::vector<char*> candidates = c_strings(paths);
  candidates.pop_back();  // no terminator: the child loops over them
  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  Fd report_read, report_write;
  {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return errno_status("pipe2");
    report_read = Fd(fds[0]);
    report_write = Fd(fds[1]);
  }
  const pid_t launcher = ::getpid();
  // fork, not posix_spawn: the child must arm its parent-death signal before exec. The launcher
  // has other threads (the store server), so the child makes only async-signal-safe calls.
  const pid_t pid = ::fork();
  if (pid < 0) return errno_status("fork");
  if (pid == 0) {
    exec_child(request, launcher, out_write.get(), err_write.get(), report_write.get(),
               candidates, argv.data(), envp.data());
  }
  report_write.reset();
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(report_read.get(), &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {
    ::waitpid(pid, nullptr, 0);
    return errno_status("exec(" + request.argv[0] + ")", child_errno);
  }

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
