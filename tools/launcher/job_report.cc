#include "tools/launcher/job_report.h"

#include <signal.h>

#include <cstring>

namespace weft::launcher {

namespace {

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string seconds(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Why the launcher stopped the ranks still running, as in "terminated by launcher <why>".
std::string stop_reason(const JobEnd& end) {
  switch (end.cause) {
    case EndCause::rank_failed:
      return "after rank " + std::to_string(end.detail) + " failed";
    case EndCause::timeout:
      return "after the " + seconds(end.timeout) + " timeout";
    case EndCause::signal:
      return "on " + signal_name(end.detail);
    case EndCause::start_failed:
      return "after a rank failed to start";
    case EndCause::ps_shard_failed:
      return "after ps shard " + std::to_string(end.detail) + " failed";
    case EndCause::none:
      break;
  }
  return "";
}

}  // namespace

std::string describe_end(const JobEnd& end, size_t ranks, int stopped, const std::string& failure) {
  std::string what;
  switch (end.cause) {
    case EndCause::rank_failed:
      what = "rank " + std::to_string(end.detail) + " failed";
      if (!failure.empty()) what += " (" + failure + ")";
      break;
    case EndCause::timeout:
      what = "timed out after " + seconds(end.timeout);
      break;
    case EndCause::signal:
      what = "got " + signal_name(end.detail);
      break;
    case EndCause::start_failed:
      what = "could not start every rank";
      break;
    case EndCause::ps_shard_failed:
      what = "ps shard " + std::to_string(end.detail) + " failed";
      if (!failure.empty()) what += " (" + failure + ")";
      break;
    case EndCause::none:
      return "";
  }
  if (stopped == 0) return what;
  std::string how = end.cause == EndCause::signal ? "forwarding it to " : "terminating ";
  if (static_cast<size_t>(stopped) == ranks)
    return what + "; " + how + "all " + plural(stopped, "rank");
  return what + "; " + how +
         plural(stopped, end.cause == EndCause::rank_failed ? "other rank" : "rank");
}

std::string format_summary(const std::vector<RankOutcome>& outcomes, const JobEnd& end) {
  std::string out;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const RankOutcome& o = outcomes[r];
    out += "weft run: rank " + std::to_string(r) + ": ";
    if (!o.started) {
      out += "not started";
    } else if (o.ended_by_launcher()) {
      out += "terminated by launcher " + stop_reason(end);
      if (o.exit) out += ": " + o.exit->describe();
    } else if (o.exit) {
      out += o.exit->describe();
    } else {
      out += "state unknown";
    }
    out += '\n';
  }
  return out;
}

}  // namespace weft::launcher
