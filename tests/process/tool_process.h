// ToolProcess: runs the `weft` binary (path compiled in as WEFT_TOOL_PATH) as a child with its
// stdout and stderr captured, for tests that drive `weft run` like a user would.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <string>
#include <vector>

namespace weft::test {

struct ToolResult {
  int exit_code = -1;  // shell convention: 128 + signal when the tool itself was killed
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};

  // Lines of `out` (without newlines).
  std::vector<std::string> out_lines() const;
};

class ToolProcess {
 public:
  // Starts `weft ARGS...`.
  explicit ToolProcess(const std::vector<std::string>& args);
  ~ToolProcess();
  ToolProcess(const ToolProcess&) = delete;
  ToolProcess& operator=(const ToolProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads stdout until `count` lines containing `needle` arrived (or it ended); true if they did.
  bool wait_for_lines(const std::string& needle, int count);
  // Reads stdout until a whole line containing `needle` arrived; returns it ("" at the end).
  std::string wait_for_line(const std::string& needle);
  // Reads both streams to the end and reaps the tool.
  ToolResult finish();

 private:
  bool read_some(int fd, std::string& into);  // false at end of stream

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::chrono::steady_clock::time_point started_;
  ToolResult result_;
};

// Runs `weft ARGS...` to the end.
ToolResult run_tool(const std::vector<std::string>& args);

// Sets environment variables for the launcher (and so its ranks) while in scope.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      names_.push_back(name);
      ::setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (const char* n : names_) ::unsetenv(n);
  }

 private:
  std::vector<const char*> names_;
};

}  // namespace weft::test
