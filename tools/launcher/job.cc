#include "tools/launcher/job.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>

#include "tools/launcher/job_report.h"
#include "tools/launcher/line_relay.h"
#include "tools/launcher/metrics_targets.h"
#include "tools/launcher/rank_process.h"
#include "tools/launcher/signal_block.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_keyed.h"
#include "security/job_key.h"
#include "transport/factory.h"
#include "weft/store.h"

extern char** environ;

namespace weft::launcher {

namespace {

// epoll user data: what became ready (high 32 bits) and for which rank (low 32 bits).
// ps_*: a parameter-server shard (low 32 bits: the shard).
enum class Source : uint32_t { signal, job_timer, grace_timer, exited, out, err, ps_exited, ps_out, ps_err };

uint64_t tag(Source s, int rank = 0) {
  return (static_cast<uint64_t>(s) << 32) | static_cast<uint32_t>(rank);
}

// The job key `weft run` makes when the user gave none: an anonymous file in memory (memfd, mode
// 0600, sealed) that the ranks inherit and read as /proc/self/fd/N. Nothing of it is left on a
// file system, whatever ends the launcher (SIGKILL included).
class KeyMemfd {
 public:
  Status create(const security::JobKey& key) {
    fd_ = Fd(::memfd_create("weft-job-key", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd_.valid()) return errno_status("memfd_create for the job key");
    WEFT_RETURN_IF_ERROR(security::write_job_key_fd(fd_.get(), key, "memfd"));
    if (::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) !=
        0) {
      return errno_status("sealing the job key memfd");
    }
    return Status::success();
  }
  int fd() const { return fd_.get(); }
  // The name a rank opens: the descriptor has the same number in every rank.
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_.get()); }

 private:
  Fd fd_;
};

struct RankSlot {
  std::optional<RankProcess> process;  // empty until started (or if starting it failed)
  std::unique_ptr<LineRelay> out;
  std::unique_ptr<LineRelay> err;
  RankOutcome outcome;
};

// A parameter-server shard beside the ranks (JobSpec::ps_shards).
struct ShardSlot {
  std::optional<RankProcess> process;
  std::unique_ptr<LineRelay> out;
  std::unique_ptr<LineRelay> err;
  std::optional<ExitInfo> exit;
};

class JobRunner {
 public:
  explicit JobRunner(const JobSpec& spec)
      : spec_(spec), slots_(spec.ranks.size()), shards_(static_cast<size_t>(spec.ps_shards)) {}
  int run();

 private:
  Status set_up();
  Status make_job_key();
  Status add_watch(int fd, uint64_t data);
  Status arm(Fd& timer, std::chrono::milliseconds after);
  Status start_ranks(const std::string& store_addr);
  Status start_rank(size_t r, bool joining);
  Status start_shard(int shard);
  void on_shard_exited(int shard);
  void stop_shards();
  SpawnRequest spawn_request(std::vector<std::string> argv, std::vector<std::string> own) const;
  void drain(Fd& fd, LineRelay& relay, bool until_drained, const std::string& who);
  void drain_to_end(RankProcess& process, LineRelay& out, LineRelay& err, const std::string& who);
  Status watch(RankProcess& process, int index, Source exited, Source out, Source err);
  void respawn(int rank);
  void handle(uint64_t data);
  void read_pipe(int rank, Source which, bool until_drained);
  void on_exited(int rank);
  void on_signal();
  void end_job(EndCause cause, int detail);
  void kill_survivors();
  int exit_code() const;

  const JobSpec& spec_;
  std::vector<RankSlot> slots_;
  std::vector<ShardSlot> shards_;
  int shards_running_ = 0;
  bool shards_stopping_ = false;  // every rank has exited: the shards were sent SIGTERM
  std::vector<pid_t> started_pids_;  // every rank process started, replacements included
  SignalBlock signals_;
  Fd epoll_;
  Fd signal_fd_;
  Fd job_timer_;
  Fd grace_timer_;
  KeyMemfd key_fd_;
  std::shared_ptr<const security::JobKey> job_key_;
  std::string key_variable_;  // "WEFT_AUTH_KEY_FILE=..." for the ranks; empty: they inherit it
  std::unique_ptr<TcpStoreServer> store_;
  std::unique_ptr<MetricsTargets> metrics_targets_;  // --metrics-sd
  int running_ = 0;
  int respawned_ = 0;
  std::string store_addr_;
  uint16_t master_port_ = 0;
  bool keep_master_ = false;
  JobEnd end_;
  std::vector<char> buffer_ = std::vector<char>(64 * 1024);
};

// A timerfd stays readable until its expiration count is read.
void consume_expirations(Fd& timer) {
  uint64_t expirations;
  while (::read(timer.get(), &expirations, sizeof expirations) < 0 && errno == EINTR) {
  }
}

void print_error(std::string_view what) {
  std::string line = "weft run: " + std::string(what) + "\n";
  write_all(STDERR_FILENO, line);
}

Status JobRunner::add_watch(int fd, uint64_t data) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = data;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return errno_status("epoll_ctl(ADD)");
  return Status::success();
}

Status JobRunner::arm(Fd& timer, std::chrono::milliseconds after) {
  itimerspec spec{};
  spec.it_value.tv_sec = after.count() / 1000;
  spec.it_value.tv_nsec = (after.count() % 1000) * 1000000L;
  if (after.count() <= 0) spec.it_value.tv_nsec = 1;  // zero would disarm
  if (::timerfd_settime(timer.get(), 0, &spec, nullptr) != 0) {
    return errno_status("timerfd_settime");
  }
  return Status::success();
}

Status JobRunner::set_up() {
  epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return errno_status("epoll_create1");
  signal_fd_ = Fd(::signalfd(-1, &signals_.blocked(), SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_.valid()) return errno_status("signalfd");
  WEFT_RETURN_IF_ERROR(add_watch(signal_fd_.get(), tag(Source::signal)));
  for (Fd* timer : {&job_timer_, &grace_timer_}) {
    *timer = Fd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!timer->valid()) return errno_status("timerfd_create");
  }
  WEFT_RETURN_IF_ERROR(add_watch(job_timer_.get(), tag(Source::job_timer)));
  WEFT_RETURN_IF_ERROR(add_watch(grace_timer_.get(), tag(Source::grace_timer)));
  if (spec_.timeout.count() > 0) WEFT_RETURN_IF_ERROR(arm(job_timer_, spec_.timeout));
  return Status::success();
}

// The user's WEFT_AUTH_KEY_FILE when set (the ranks inherit it), else a fresh key in a memfd the
// ranks inherit.
Status JobRunner::make_job_key() {
  const char* given = std::getenv(security::kAuthKeyFileVariable);
  if (given != nullptr && *given != '\0') {
    Result<security::JobKey> key = security::read_job_key_file(given);
    if (!key.ok()) return key.status().with_context(security::kAuthKeyFileVariable);
    job_key_ = std::make_shared<const security::JobKey>(std::move(key).value());
    return Status::success();
  }
  Result<security::JobKey> key = security::JobKey::generate();
  if (!key.ok()) return key.status().with_context("making the job key");
  WEFT_RETURN_IF_ERROR(key_fd_.create(key.value()));
  job_key_ = std::make_shared<const security::JobKey>(std::move(key).value());
  key_variable_ = std::string(security::kAuthKeyFileVariable) + "=" + key_fd_.path();
  return Status::success();
}

// The inherited environment minus the variables every rank gets its own value of.
std::vector<std::string> base_environment(const std::vector<std::string>& overridden) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& o : overridden) {
      if (std::string_view(o).substr(0, o.find('=')) == name) replaced = true;
    }
    if (!replaced) env.emplace_back(entry);
  }
  return env;
}

// A loopback port that was free a moment ago, for torch's TCPStore under env:// (rank 0 binds
// it). The same small race every launcher that picks a port for its ranks has.
Result<uint16_t> free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(ErrorCode::io, "socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) return Status(ErrorCode::io, "could not find a free loopback port");
  return ntohs(a.sin_port);
}

Status JobRunner::start_ranks(const std::string& store_addr) {
  store_addr_ = store_addr;
  keep_master_ = std::getenv("MASTER_ADDR") != nullptr && std::getenv("MASTER_PORT") != nullptr;
  if (!keep_master_) {
    Result<uint16_t> port = free_loopback_port();
    if (!port.ok()) return port.status();
    master_port_ = port.value();
  }
  for (int s = 0; s < spec_.ps_shards; ++s) WEFT_RETURN_IF_ERROR(start_shard(s));
  for (size_t r = 0; r < slots_.size(); ++r) WEFT_RETURN_IF_ERROR(start_rank(r, false));
  return Status::success();
}

SpawnRequest JobRunner::spawn_request(std::vector<std::string> argv,
                                      std::vector<std::string> own) const {
  SpawnRequest request;
  request.argv = std::move(argv);
  if (!key_variable_.empty()) own.push_back(key_variable_);
  request.env = base_environment(own);
  request.env.insert(request.env.end(), own.begin(), own.end());
  request.keep_fd = key_fd_.fd();
  request.signal_mask = signals_.old_mask();
  request.default_signals = signals_.child_defaults();
  return request;
}

Status JobRunner::watch(RankProcess& process, int index, Source exited, Source out, Source err) {
  WEFT_RETURN_IF_ERROR(add_watch(process.pidfd(), tag(exited, index)));
  WEFT_RETURN_IF_ERROR(add_watch(process.stdout_pipe().get(), tag(out, index)));
  return add_watch(process.stderr_pipe().get(), tag(err, index));
}

// Everything an exited process wrote is in the pipes by now; take it, then stop reading: a
// helper it left behind could hold the pipes open forever.
void JobRunner::drain_to_end(RankProcess& process, LineRelay& out, LineRelay& err,
                             const std::string& who) {
  drain(process.stdout_pipe(), out, true, who);
  drain(process.stderr_pipe(), err, true, who);
  out.finish();
  err.finish();
  process.stdout_pipe().reset();
  process.stderr_pipe().reset();
}

Status JobRunner::start_shard(int shard) {
  const std::string i = std::to_string(shard);
  SpawnRequest request = spawn_request(
      {spec_.weft_path, "ps", "serve", "--shard", i, "--of", std::to_string(spec_.ps_shards)},
      {"WEFT_STORE_ADDR=" + store_addr_});
  Result<RankProcess> process = RankProcess::spawn(request);
  if (!process.ok()) return process.status().with_context("ps shard " + i);
  ShardSlot& slot = shards_[static_cast<size_t>(shard)];
  slot.process.emplace(std::move(process).value());
  slot.out = std::make_unique<LineRelay>("ps" + i, STDOUT_FILENO);
  slot.err = std::make_unique<LineRelay>("ps" + i, STDERR_FILENO);
  ++shards_running_;
  return watch(*slot.process, shard, Source::ps_exited, Source::ps_out, Source::ps_err);
}

void JobRunner::on_shard_exited(int shard) {
  ShardSlot& slot = shards_[static_cast<size_t>(shard)];
  if (slot.process->reaped()) return;
  auto reaped = slot.process->try_reap();
  if (!reaped.ok()) {
    print_error(reaped.status().to_string());
    return;
  }
  if (!reaped.value()) return;
  drain_to_end(*slot.process, *slot.out, *slot.err, "ps shard " + std::to_string(shard));
  slot.exit = *reaped.value();
  --shards_running_;
  if (!shards_stopping_ && end_.cause == EndCause::none) end_job(EndCause::ps_shard_failed, shard);
}

// Every rank has exited: the shards have served their purpose.
void JobRunner::stop_shards() {
  shards_stopping_ = true;
  for (auto& slot : shards_) {
    if (slot.process && !slot.process->reaped()) slot.process->signal_group(SIGTERM);
  }
  Status st = arm(grace_timer_, spec_.grace);
  if (!st.ok()) {
    print_error(st.to_string());
    kill_survivors();
  }
}

Status JobRunner::start_rank(size_t r, bool joining) {
  const int rank = static_cast<int>(r);
  std::vector<std::string> own = rank_environment(spec_.ranks[r], store_addr_);
  for (auto& v : torch_environment(spec_.ranks[r], master_port_, keep_master_)) {
    own.push_back(std::move(v));
  }
  if (joining) own.push_back("WEFT_JOIN=1");
  if (!spec_.metrics_sd.empty() && std::getenv("WEFT_METRICS_ADDR") == nullptr) {
    own.push_back("WEFT_METRICS_ADDR=127.0.0.1:0");
  }
  SpawnRequest request = spawn_request(spec_.command, std::move(own));
  request.inherit_stdin = rank == 0 && !joining;
  Result<RankProcess> process = RankProcess::spawn(request);
  if (!process.ok()) return process.status().with_context("rank " + std::to_string(rank));
  RankSlot& slot = slots_[r];
  slot.process.emplace(std::move(process).value());
  started_pids_.push_back(slot.process->pid());
  slot.outcome = RankOutcome();
  slot.outcome.started = true;
  slot.out = std::make_unique<LineRelay>(rank, STDOUT_FILENO);
  slot.err = std::make_unique<LineRelay>(rank, STDERR_FILENO);
  ++running_;
  return watch(*slot.process, rank, Source::exited, Source::out, Source::err);
}

void JobRunner::respawn(int rank) {
  ++respawned_;
  RankSlot& slot = slots_[static_cast<size_t>(rank)];
  print_error("rank " + std::to_string(rank) + " failed (" + slot.outcome.exit->describe() +
              "); starting a replacement that joins the running job (respawn " +
              std::to_string(respawned_) + " of " + std::to_string(spec_.respawns) + ")");
  Status st = start_rank(static_cast<size_t>(rank), true);
  if (!st.ok()) {
    print_error(st.to_string());
    end_job(EndCause::start_failed, 0);
  }
}

int JobRunner::run() {
  Status st = set_up();
  if (!st.ok()) {
    print_error(st.to_string());
    return kLauncherErrorExitCode;
  }
  st = make_job_key();
  if (!st.ok()) {
    print_error(st.to_string());
    return kLauncherErrorExitCode;
  }
  auto server = start_tcp_store_server("127.0.0.1", 0, TcpStoreConfig(), job_key_);
  if (!server.ok()) {
    print_error("cannot start the rendezvous store: " + server.status().to_string());
    return kLauncherErrorExitCode;
  }
  store_ = std::move(server).value();
  if (!spec_.metrics_sd.empty()) {
    auto client = connect_tcp_store_with_key("127.0.0.1", store_->port(),
                                             std::chrono::seconds(10), job_key_);
    Result<std::unique_ptr<MetricsTargets>> targets = client.status();
    if (client.ok()) {
      // The ranks' keys live in the job's namespace (rendezvous/bootstrap.h).
      const char* job_id = std::getenv("WEFT_JOB_ID");
      const std::string prefix = job_namespace(job_id != nullptr ? job_id : "", job_key_.get());
      std::shared_ptr<Store> job_store =
          prefix.empty() ? client.value() : make_prefix_store(prefix, client.value());
      targets = MetricsTargets::start(spec_.metrics_sd, static_cast<int>(slots_.size()),
                                      std::move(job_store));
    }
    if (!targets.ok()) {
      print_error("--metrics-sd: " + targets.status().to_string());
      return kLauncherErrorExitCode;
    }
    metrics_targets_ = std::move(targets).value();
  }
  st = start_ranks("127.0.0.1:" + std::to_string(store_->port()));
  if (!st.ok()) {
    print_error(st.to_string());
    end_job(EndCause::start_failed, 0);
  }

  epoll_event events[64];
  while (running_ > 0 || shards_running_ > 0) {
    if (running_ == 0 && !shards_stopping_) stop_shards();
    int n = ::epoll_wait(epoll_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      print_error(errno_status("epoll_wait").to_string() + "; killing every rank");
      kill_survivors();
      for (size_t r = 0; r < slots_.size(); ++r) {
        if (slots_[r].process && !slots_[r].process->reaped()) on_exited(static_cast<int>(r));
      }
      shards_stopping_ = true;
      for (size_t s = 0; s < shards_.size(); ++s) {
        if (shards_[s].process && !shards_[s].process->reaped()) on_shard_exited(static_cast<int>(s));
      }
      break;
    }
    for (int i = 0; i < n; ++i) handle(events[i].data.u64);
  }
  metrics_targets_.reset();  // the targets are gone: empties the file
  // Every rank has exited. One killed while it set up shared memory (before the ranks unlink
  // their segments) would leave its segment in /dev/shm until the next job on this host.
  remove_transport_leftovers(started_pids_);
  int code = exit_code();
  if (code != 0 || spec_.summary_always) {
    std::vector<RankOutcome> outcomes;
    for (const auto& slot : slots_) outcomes.push_back(slot.outcome);
    write_all(STDERR_FILENO, format_summary(outcomes, end_));
  }
  return code;
}

void JobRunner::handle(uint64_t data) {
  auto source = static_cast<Source>(data >> 32);
  int rank = static_cast<int>(data & 0xffffffffu);
  switch (source) {
    case Source::signal:
      on_signal();
      break;
    case Source::job_timer:
      consume_expirations(job_timer_);
      if (end_.cause == EndCause::none) end_job(EndCause::timeout, 0);
      break;
    case Source::grace_timer:
      consume_expirations(grace_timer_);
      print_error(std::string(shards_stopping_ && running_ == 0 ? "ps shards" : "ranks") +
                  " still running " + std::to_string(spec_.grace.count()) +
                  " ms after the signal: sending SIGKILL");
      kill_survivors();
      break;
    case Source::exited:
      on_exited(rank);
      break;
    case Source::out:
    case Source::err:
      read_pipe(rank, source, false);
      break;
    case Source::ps_exited:
      on_shard_exited(rank);
      break;
    case Source::ps_out:
    case Source::ps_err: {
      ShardSlot& slot = shards_[static_cast<size_t>(rank)];
      const bool out = source == Source::ps_out;
      drain(out ? slot.process->stdout_pipe() : slot.process->stderr_pipe(),
            out ? *slot.out : *slot.err, false, "ps shard " + std::to_string(rank));
      break;
    }
  }
}

// Reads what the pipe holds now. Without `until_drained`, a bounded amount, so one chatty rank
// cannot starve the others (epoll reports the rest again).
void JobRunner::read_pipe(int rank, Source which, bool until_drained) {
  RankSlot& slot = slots_[static_cast<size_t>(rank)];
  Fd& fd = which == Source::out ? slot.process->stdout_pipe() : slot.process->stderr_pipe();
  LineRelay& relay = which == Source::out ? *slot.out : *slot.err;
  drain(fd, relay, until_drained, "rank " + std::to_string(rank));
}

void JobRunner::drain(Fd& fd, LineRelay& relay, bool until_drained, const std::string& who) {
  for (int reads = 0; fd.valid() && (until_drained || reads < 16); ++reads) {
    ssize_t n = ::read(fd.get(), buffer_.data(), buffer_.size());
    if (n > 0) {
      relay.feed(std::string_view(buffer_.data(), static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
      print_error(errno_status("read(" + who + " output)").to_string());
    }
    relay.finish();  // end of stream (or a read error): flush the partial line, stop watching
    fd.reset();      // closing removes it from the epoll set
  }
}

void JobRunner::on_exited(int rank) {
  RankSlot& slot = slots_[static_cast<size_t>(rank)];
  if (slot.process->reaped()) return;  // reaped earlier in this batch of events
  auto reaped = slot.process->try_reap();
  if (!reaped.ok()) {
    print_error(reaped.status().to_string());
    return;
  }
  if (!reaped.value()) return;  // not exited after all
  drain_to_end(*slot.process, *slot.out, *slot.err, "rank " + std::to_string(rank));
  slot.outcome.exit = *reaped.value();
  --running_;
  if (!slot.outcome.exit->success() && end_.cause == EndCause::none) {
    if (respawned_ < spec_.respawns) {
      respawn(rank);
    } else {
      end_job(EndCause::rank_failed, rank);
    }
  }
}

void JobRunner::on_signal() {
  signalfd_siginfo info;
  while (::read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    int sig = static_cast<int>(info.ssi_signo);
    if (end_.cause == EndCause::none) {
      end_job(EndCause::signal, sig);
    } else {
      print_error("second signal: killing every rank now");
      kill_survivors();
    }
  }
}

void JobRunner::end_job(EndCause cause, int detail) {
  end_.cause = cause;
  end_.detail = detail;
  end_.timeout = spec_.timeout;
  // Ranks that already exited on their own keep their own outcome.
  for (size_t r = 0; r < slots_.size(); ++r) {
    if (slots_[r].process && !slots_[r].process->reaped()) on_exited(static_cast<int>(r));
  }
  int sig = cause == EndCause::signal ? detail : SIGTERM;
  int stopped = 0;
  for (auto& slot : slots_) {
    if (!slot.process || slot.process->reaped()) continue;
    slot.process->signal_group(sig);
    slot.outcome.stopped_by_launcher = true;
    slot.outcome.signals_sent |= uint64_t{1} << sig;
    ++stopped;
  }
  std::string failure;
  if (cause == EndCause::rank_failed) {
    failure = slots_[static_cast<size_t>(detail)].outcome.exit->describe();
  } else if (cause == EndCause::ps_shard_failed) {
    failure = shards_[static_cast<size_t>(detail)].exit->describe();
  }
  print_error(describe_end(end_, slots_.size(), stopped, failure));
  if (stopped > 0) {
    Status st = arm(grace_timer_, spec_.grace);
    if (!st.ok()) {
      print_error(st.to_string());
      kill_survivors();
    }
  }
}

void JobRunner::kill_survivors() {
  for (auto& slot : slots_) {
    if (slot.process && !slot.process->reaped()) {
      slot.process->signal_group(SIGKILL);
      slot.outcome.stopped_by_launcher = true;
      slot.outcome.signals_sent |= uint64_t{1} << SIGKILL;
    }
  }
  for (auto& slot : shards_) {
    if (slot.process && !slot.process->reaped()) slot.process->signal_group(SIGKILL);
  }
}

int JobRunner::exit_code() const {
  switch (end_.cause) {
    case EndCause::none:
      return 0;
    case EndCause::timeout:
      return kTimeoutExitCode;
    case EndCause::signal:
      return 128 + end_.detail;
    case EndCause::start_failed:
      return kSpawnFailedExitCode;
    case EndCause::rank_failed:
      return slots_[static_cast<size_t>(end_.detail)].outcome.exit->shell_code();
    case EndCause::ps_shard_failed: {
      const int code = shards_[static_cast<size_t>(end_.detail)].exit->shell_code();
      return code != 0 ? code : kLauncherErrorExitCode;  // gone while ranks ran: a failure
    }
  }
  return kLauncherErrorExitCode;
}

}  // namespace

int run_job(const JobSpec& spec) {
  JobRunner runner(spec);
  return runner.run();
}

}  // namespace weft::launcher
