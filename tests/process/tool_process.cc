#include "process/tool_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace weft::test {

std::vector<std::string> ToolResult::out_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

ToolProcess::ToolProcess(const std::vector<std::string>& args) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<std::string> all = {WEFT_TOOL_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  started_ = std::chrono::steady_clock::now();
  int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
}

ToolProcess::~ToolProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool ToolProcess::read_some(int fd, std::string& into) {
  char buf[65536];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  into.append(buf, static_cast<size_t>(n));
  return true;
}

bool ToolProcess::wait_for_lines(const std::string& needle, int count) {
  while (true) {
    int seen = 0;
    for (size_t pos = result_.out.find(needle); pos != std::string::npos;
         pos = result_.out.find(needle, pos + 1)) {
      ++seen;
    }
    if (seen >= count) return true;
    if (!read_some(out_fd_, result_.out)) return false;
  }
}

std::string ToolProcess::wait_for_line(const std::string& needle) {
  while (true) {
    const size_t pos = result_.out.find(needle);
    if (pos != std::string::npos) {
      const size_t begin = result_.out.rfind('\n', pos);
      const size_t end = result_.out.find('\n', pos);
      if (end != std::string::npos) {
        const size_t from = begin == std::string::npos ? 0 : begin + 1;
        return result_.out.substr(from, end - from);
      }
    }
    if (!read_some(out_fd_, result_.out)) return "";
  }
}

ToolResult ToolProcess::finish() {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  int open_streams = 2;
  while (open_streams > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!read_some(fds[i].fd, i == 0 ? result_.out : result_.err)) {
        fds[i].fd = -1;
        --open_streams;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  result_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started_);
  result_.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return result_;
}

ToolResult run_tool(const std::vector<std::string>& args) {
  ToolProcess p(args);
  return p.finish();
}

}  // namespace weft::test
