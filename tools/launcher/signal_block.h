// SignalBlock: the launcher's signal set-up for the lifetime of a job. SIGINT, SIGTERM and SIGHUP
// are blocked so they can be read from a signalfd and forwarded to the ranks; SIGPIPE is ignored
// so a closed stdout (`weft run ... | head`) cannot kill the launcher. Create it before any thread
// starts (the store server's): threads inherit the mask. Children get the original mask back.
#pragma once

#include <signal.h>

namespace weft::launcher {

class SignalBlock {
 public:
  SignalBlock();
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

  const sigset_t& blocked() const { return blocked_; }    // what the signalfd reads
  const sigset_t& old_mask() const { return old_mask_; }  // what the children start with
  // What the children reset to SIG_DFL: SIGPIPE if the launcher ignores it only by its own choice
  // (an ignore inherited from the launcher's parent is passed on, as a shell would).
  const sigset_t& child_defaults() const { return child_defaults_; }

 private:
  sigset_t blocked_;
  sigset_t old_mask_;
  sigset_t child_defaults_;
  sighandler_t old_pipe_;
};

}  // namespace weft::launcher
