#include "tools/launcher/signal_block.h"

#include <pthread.h>

#include <initializer_list>

namespace weft::launcher {

SignalBlock::SignalBlock() {
  sigemptyset(&blocked_);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&blocked_, sig);
  ::pthread_sigmask(SIG_BLOCK, &blocked_, &old_mask_);
  old_pipe_ = ::signal(SIGPIPE, SIG_IGN);
  sigemptyset(&child_defaults_);
  if (old_pipe_ == SIG_DFL) sigaddset(&child_defaults_, SIGPIPE);
}

SignalBlock::~SignalBlock() {
  ::signal(SIGPIPE, old_pipe_);
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace weft::launcher
