#include "core/communicator_impl.h"

#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "collective/collective.h"
#include "core/diag_report.h"
#include "transport/mixed/mixed_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tcp_transport.h"
#include "weft/communicator.h"

namespace weft {
namespace {

// How long an operation queued while the executor sleeps waits for a caller to run it (Work::wait
// without a timeout) before the executor wakes and starts it: between these, far below the
// compute it overlaps with. The delay halves when the executor wakes to work nobody waited for
// (callers compute meanwhile) and doubles when it finds the work run already (callers wait at
// once, as in a loop of small blocking torch calls: then its wakes, each a context switch that
// delays the next call, become rare).
constexpr auto kMinExecutorDelay = std::chrono::microseconds(50);
constexpr auto kMaxExecutorDelay = std::chrono::microseconds(1600);

// Agree on a random communicator token through the store (rank 0 draws it).
Result<uint64_t> agree_token(Store& store, int rank, std::chrono::milliseconds timeout) {
  if (rank == 0) {
    std::random_device rd;
    uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    if (token == 0) token = 1;
    Bytes b(8);
    std::memcpy(b.data(), &token, 8);
    WEFT_RETURN_IF_ERROR(store.set("comm/token", b));
    return token;
  }
  auto b = store.get("comm/token", timeout);
  if (!b.ok()) return b.status().with_context(fmt::format("rank {}: waiting for rank 0 to join", rank));
  if (b->size() != 8) return Status(ErrorCode::protocol, "malformed communicator token in store");
  uint64_t token;
  std::memcpy(&token, b->data(), 8);
  return token;
}

// steady_clock's time from CLOCK_MONOTONIC_COARSE (the same clock, advanced once per tick,
// 1-4 ms here): a few nanoseconds instead of ~27 for a precise read, which matters on the path
// of an 8-byte collective. Good enough for what it stamps: the flight record and the deadline of
// blocking calls, which are about seconds.
std::chrono::steady_clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                               std::chrono::nanoseconds(ts.tv_nsec));
}

// Puts the rank and operation in front of a transport error unless it already names them.
Status describe_failure(const Status& st, int rank, const Fingerprint& fp) {
  if (st.ok()) return st;
  std::string desc = fp.describe();
  if (st.message().find(desc) != std::string::npos) return st;
  std::string msg = st.message();
  std::string prefix = fmt::format("rank {}: ", rank);
  if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
  return Status(st.code(), fmt::format("rank {}: {} failed: {}", rank, desc, msg));
}

}  // namespace

Result<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::create(
    const Options& options, std::shared_ptr<Store> store, std::unique_ptr<TcpStoreServer> server,
    bool allow_hierarchy, int machine_ranks, std::shared_ptr<Store> root_store) {
  WEFT_RETURN_IF_ERROR(options.validate());
  if (options.rank < 0 || options.size <= 0) {
    return Status(ErrorCode::invalid_argument, "Options.rank and Options.size must be set");
  }
  if (!store) return Status(ErrorCode::invalid_argument, "a Store is required");
  log::set_level(options.log_level);
  std::unique_ptr<CommunicatorImpl> c(new CommunicatorImpl());
  c->runner_ = std::make_shared<QueueRunner>();
  c->runner_->impl = c.get();
  Result<Alarm> alarm = Alarm::create();
  if (!alarm.ok()) return alarm.status();
  c->alarm_ = std::move(alarm).value();
  c->options_ = options;
  c->store_ = std::move(store);
  c->server_ = std::move(server);
  c->pool_ = std::make_unique<BufferPool>();
  c->recorder_ = std::make_unique<FlightRecorder>(options.flight_recorder);
  if (c->options_.host_id.empty()) c->options_.host_id = tcp::default_host_id();
  if (c->rank() == 0) log::info("options: {}", c->options_.describe());

  auto token = agree_token(*c->store_, c->rank(), options.connect_timeout);
  if (!token.ok()) return token.status();
  c->token_ = token.value();
  bool use_shm = false;
  std::optional<HostLayout> layout;
  if (c->options_.transport != TransportKind::tcp) {
    // "<host key>\n<machine key>": the host id may be overridden, the machine is the real one
    // (its CPUs are shared by every rank on it, whatever namespaces they are in).
    const std::string machine = tcp::default_host_id();
    auto both = exchange_host_keys(*c->store_, c->rank(), c->size(),
                                   shm_host_key(c->options_.host_id) + "\n" + machine,
                                   options.connect_timeout);
    if (!both.ok()) return both.status();
    std::vector<std::string> keys;
    int same_machine = 0;
    for (const std::string& k : both.value()) {
      const size_t nl = k.find('\n');
      keys.push_back(k.substr(0, nl));
      if (nl != std::string::npos && k.substr(nl + 1) == machine) ++same_machine;
    }
    c->machine_ranks_ = machine_ranks > 0 ? machine_ranks : std::max(1, same_machine);
    layout = HostLayout::from_keys(keys);
    use_shm = layout->host_count() == 1;
  }
  // Several hosts, some with several ranks: shm to the peers on this host, TCP to the others
  // (MixedTransport). auto does so only when the machine's ranks fit its CPUs: otherwise the
  // hand-offs through the shm progress thread cost more than loopback TCP (a ring allreduce of
  // 8 B-32 KiB, 4 ranks on 2 cores as two pretend hosts: 0.24-0.37 ms over TCP alone, 0.24-0.59
  // ms mixed; docs/configuration.md). transport=shm asks for it anyway. Every rank of a
  // machine decides alike (the job's ranks there against its online CPUs).
  const bool spans_hosts = !use_shm && layout && layout->host_count() > 1 && layout->max_local() > 1;
  const bool fits = c->machine_ranks_ <= static_cast<int>(std::thread::hardware_concurrency());
  const bool mixed = spans_hosts && (c->options_.transport == TransportKind::shm || fits);
  if (c->rank() == 0) {
    log::info("transport: {} ({} ranks{}{})",
              use_shm ? "shm" : mixed ? "shm within hosts, tcp between" : "tcp", c->size(),
              use_shm ? ", all on one host" : spans_hosts ? ", " + layout->describe() : "",
              spans_hosts && !mixed
                  ? "; tcp inside hosts too: the ranks outnumber the CPUs (transport=shm forces shm)"
                  : "");
  }
  const std::vector<int> host =
      layout ? layout->hosts[static_cast<size_t>(layout->host_of[static_cast<size_t>(c->rank())])]
             : std::vector<int>{};
  auto make_shm = [&](Store& store) {
    ShmTransportConfig sc;
    sc.rank = c->rank();
    sc.size = c->size();
    sc.token = token.value();
    sc.options = c->options_;
    sc.machine_ranks = c->machine_ranks_;
    if (mixed) {
      sc.members = host;
      sc.rank = layout->local_index[static_cast<size_t>(c->rank())];
      sc.size = static_cast<int>(host.size());
      sc.caller_progress = false;
      // Its own token per host: the pretend hosts of a test share one process (segment names
      // hold the token, index and pid).
      sc.token ^= 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(host.front() + 1);
    }
    return make_shm_transport(sc, store, *c->pool_);
  };
  auto make_tcp = [&]() {
    TcpTransportConfig tc;
    tc.rank = c->rank();
    tc.size = c->size();
    tc.token = token.value();
    tc.host_id = c->options_.host_id;
    tc.options = c->options_;
    return make_tcp_transport(tc, *c->store_, *c->pool_);
  };
  auto make_transport = [&]() -> Result<std::unique_ptr<Transport>> {
    if (use_shm) return make_shm(*c->store_);
    if (!mixed || host.size() < 2) {
      if (mixed) c->transport_name_ = "tcp (alone on its host)";
      return make_tcp();
    }
    auto tcp = make_tcp();
    if (!tcp.ok()) return tcp.status();
    auto prefixed = make_prefix_store(fmt::format("mixed/{}", host.front()), c->store_);
    auto shm = make_shm(*prefixed);
    if (!shm.ok()) return shm.status();
    std::vector<bool> local(static_cast<size_t>(c->size()), false);
    std::string peers;
    for (int r : host) {
      local[static_cast<size_t>(r)] = true;
      if (r != c->rank()) peers += fmt::format("{}{}", peers.empty() ? "" : ",", r);
    }
    c->transport_name_ = fmt::format("mixed (shm to ranks {}, tcp to the others)", peers);
    return make_mixed_transport(c->rank(), c->size(), std::move(local), std::move(shm.value()),
                                std::move(tcp.value()));
  };
  c->transport_name_ = use_shm ? "shm" : "tcp";
  auto transport = make_transport();
  if (!transport.ok()) return transport.status();
  c->transport_ = std::move(transport.value());
  if (allow_hierarchy && layout && layout->host_count() > 1 && layout->max_local() > 1) {
    if (c->rank() == 0) log::info("hierarchical collectives over {}", layout->describe());
    auto h = Hierarchy::create(*layout, c->rank(), c->options_, c->store_, c->machine_ranks_);
    if (!h.ok()) return h.status();
    c->hierarchy_ = std::move(h.value());
  }
  c->root_store_ = root_store ? std::move(root_store) : c->store_;
  c->start_watchdog();
  if (allow_hierarchy) c->start_diag_responder();
  return c;
}

CommunicatorImpl::~CommunicatorImpl() { (void)shutdown(); }

void CommunicatorImpl::start_watchdog() {
  if (options_.peer_timeout.count() <= 0 || size() < 2) return;
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

void CommunicatorImpl::stop_watchdog() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (diag_.joinable()) diag_.join();
  if (diag_slot_ > 0) {
    (void)root_store_->set(fmt::format("weft-diag/comm/{}/closed", diag_slot_), "1");
    diag_slot_ = 0;
  }
}

void CommunicatorImpl::start_diag_responder() {
  // Best effort: diagnosis must never make a communicator fail.
  auto seen = root_store_->add("weft-diag/requests", 0);
  if (!seen.ok()) return;
  diag_seen_ = seen.value();
  if (rank() == 0) {
    auto slot = root_store_->add("weft-diag/comms", 1);
    if (slot.ok()) {
      nlohmann::json entry = {{"token", fmt::format("{:016x}", token_)}, {"size", size()}};
      if (root_store_->set(fmt::format("weft-diag/comm/{}", slot.value()), entry.dump()).ok()) {
        diag_slot_ = slot.value();
      }
    }
  }
  diag_ = std::thread([this] { diag_loop(); });
}

void CommunicatorImpl::diag_loop() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return watch_stop_; })) {
    lock.unlock();
    // get() with no wait: bounded (about 250 ms to connect) even when the store is gone, e.g.
    // hosted by a rank that already exited, so shutting down never waits long for this thread.
    auto text = root_store_->get_string("weft-diag/requests", std::chrono::milliseconds(0));
    int64_t requests = 0;
    if (text.ok()) {
      auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), requests);
      if (ec != std::errc()) requests = 0;
    }
    if (requests > diag_seen_) {
      diag_seen_ = requests;
      (void)root_store_->set(fmt::format("weft-diag/response/{}/{:016x}/rank{}", diag_seen_,
                                         token_, rank()),
                             flight_record_json());
    }
    lock.lock();
  }
}

void CommunicatorImpl::watchdog_loop() {
  const auto period = std::clamp<std::chrono::milliseconds>(
      options_.peer_timeout / 5, std::chrono::milliseconds(10), std::chrono::milliseconds(2000));
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, period, [&] { return watch_stop_; })) {
    lock.unlock();
    if (broken().ok()) {
      Status st = transport_->heartbeat(std::chrono::steady_clock::now(), options_.peer_timeout);
      if (!st.ok()) {
        const bool first = broken().ok();
        set_broken(st);
        if (first) dump_flight_record(st);
      }
    }
    lock.lock();
  }
}

std::shared_ptr<WorkImpl> CommunicatorImpl::failed_work(Status st) {
  auto w = std::make_shared<WorkImpl>();
  w->mark_started();
  w->finish(std::move(st));
  return w;
}

Status CommunicatorImpl::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void CommunicatorImpl::set_broken(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = st;
    is_broken_.store(true, std::memory_order_release);
  }
  transport_->fail(st);
  if (hierarchy_) hierarchy_->abort(st.message());
}

std::shared_ptr<WorkImpl> CommunicatorImpl::submit_collective(CollectiveArgs args) {
  Op op;
  op.args = std::move(args);
  op.kind = op.args.kind;
  return submit(std::move(op));
}

std::shared_ptr<WorkImpl> CommunicatorImpl::submit_p2p(OpKind kind, void* buf, size_t bytes,
                                                       int peer, uint32_t tag) {
  Op op;
  op.p2p = true;
  op.kind = kind;
  op.buf = buf;
  op.bytes = bytes;
  op.peer = peer;
  op.tag = tag;
  return submit(std::move(op));
}

void CommunicatorImpl::prepare_collective(Op& op, std::chrono::steady_clock::time_point queued,
                                          bool run_now) {
  op.fp = make_fingerprint(op.args, ++next_seq_);
  op.hierarchical = hierarchy_ && Hierarchy::handles(op.args, options_);
  op.bytes = payload_bytes(op.args, size());
  const size_t bytes = op.bytes;
  if (op.hierarchical && options_.algorithm(op.kind) != Algorithm::hierarchical) {
    // Left to auto: flat or hierarchical by measured cost. Later calls are settled again when
    // they run (the agreement may come between).
    op.choice = choice_.admit(op.kind, bytes);
    if (op.choice == HierarchyChoice::kTrials - 1) op.agree_seq = ++next_seq_;
    op.hierarchical = choice_.hierarchical(op.kind, bytes, op.choice);
  }
  op.algorithm = op.hierarchical
                     ? Algorithm::hierarchical
                     : selected_algorithm(op.args.kind, bytes, size(), options_,
                                          transport_->shared_capacity());
  // Run at once: recorded as running from the start (one recorder update less).
  if (run_now) op.started = queued;
  op.record = recorder_->add_collective(op.kind, op.fp.dtype, op.fp.op, op.fp.root, op.fp.count,
                                        op.fp.seq, op.algorithm, queued, run_now);
}

Status CommunicatorImpl::run_blocking(CollectiveArgs&& args) {
  Op op;
  op.args = std::move(args);
  op.kind = op.args.kind;
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.ok() || shut_down_ || !queue_.empty() || running_) {
    lock.unlock();
    return submit(std::move(op))->wait(std::chrono::milliseconds::max());
  }
  // Nothing ahead of it: run here, with no Work to allocate, finish and wait on, and stamp it
  // with the coarse clock (no Work reports its times; see coarse_now).
  op.coarse_clock = true;
  prepare_collective(op, coarse_now(), true);
  running_.store(true, std::memory_order_relaxed);
  lock.unlock();
  Status st = execute(op);
  // Done without taking mu_ again when nobody waits on cv_ (the common case): a waiter counts
  // itself in cv_waiters_ before it looks at running_, and this looks at cv_waiters_ after
  // clearing running_, so either it sees running_ cleared or this sees it and wakes it.
  running_.store(false, std::memory_order_seq_cst);
  if (cv_waiters_.load(std::memory_order_seq_cst) != 0) {
    std::lock_guard<std::mutex> relock(mu_);
    cv_.notify_all();
  }
  return st;
}

Status CommunicatorImpl::execute_unlocked(std::unique_lock<std::mutex>& lock, Op& op) {
  running_ = true;
  lock.unlock();
  Status st = execute(op);
  lock.lock();
  running_ = false;
  // Waiters count themselves under mu_, so none is missed; the idle executor is not one of them.
  if (cv_waiters_.load(std::memory_order_relaxed) != 0) cv_.notify_all();
  return st;
}

void CommunicatorImpl::run_queued_through(const WorkImpl* w) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!running_ && !queue_.empty()) {
    if (std::none_of(queue_.begin(), queue_.end(),
                     [w](const Op& op) { return op.work.get() == w; })) {
      return;
    }
    Op op = std::move(queue_.front());
    queue_.pop_front();
    (void)execute_unlocked(lock, op);
  }
}

std::shared_ptr<WorkImpl> CommunicatorImpl::submit(Op op) {
  op.work = std::make_shared<WorkImpl>(op.p2p);
  auto work = op.work;
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.ok()) {
    work->finish(broken_);
    return work;
  }
  if (shut_down_) {
    work->finish(Status(ErrorCode::aborted, fmt::format("rank {}: communicator is shut down", rank())));
    return work;
  }
  const auto queued = std::chrono::steady_clock::now();
  // Posting a point-to-point operation never blocks, so it runs here when nothing is ahead of
  // it. A collective goes to the executor thread even then: the caller must get its Work back at
  // once, to compute meanwhile or to post the messages a peer needs before it can join (an
  // allreduce_async followed by a send that the peer receives before its allreduce).
  const bool run_now = op.p2p && queue_.empty() && !running_;
  if (!op.p2p) {
    prepare_collective(op, queued, run_now);
  } else {
    FlightEntry entry;
    entry.kind = op.kind;
    entry.queued = queued;
    entry.count = op.bytes;
    entry.peer = op.peer;
    entry.tag = op.tag;
    entry.work = work;
    std::erase_if(p2p_in_flight_, [](const auto& w) { return w->test(); });
    p2p_in_flight_.push_back(work);
    op.record = recorder_->add(std::move(entry));
  }
  if (run_now) {
    (void)execute_unlocked(lock, op);
    return work;
  }
  work->set_runner(runner_);
  queue_.push_back(std::move(op));
  if (!executor_.joinable()) {
    executor_ = std::thread([this] { executor_loop(); });
  } else if (executor_idle_ && !alarm_set_) {
    alarm_set_ = true;
    alarm_.set(executor_delay_);
  }
  return work;
}

void CommunicatorImpl::executor_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!queue_.empty() && !running_) {
      Op op = std::move(queue_.front());
      queue_.pop_front();
      (void)execute_unlocked(lock, op);
      continue;
    }
    if (!queue_.empty()) {
      // Queued behind an operation another thread executes: wait for its end on cv_.
      cv_waiters_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lock, [&] { return !running_.load(std::memory_order_seq_cst); });
      cv_waiters_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    if (stopping_) return;
    executor_idle_ = true;
    lock.unlock();
    alarm_.sleep();  // a setting made before this still wakes it: the timer holds it
    lock.lock();
    executor_idle_ = false;
    alarm_set_ = false;
    executor_delay_ = queue_.empty() ? std::min(executor_delay_ * 2, kMaxExecutorDelay)
                                     : std::max(executor_delay_ / 2, kMinExecutorDelay);
  }
}

Status CommunicatorImpl::agree_on_costs(const Op& op) {
  const size_t bytes = op.bytes;
  std::array<double, 2> costs = choice_.costs(op.kind, bytes);
  CollectiveArgs a;
  a.kind = OpKind::allreduce;
  a.dtype = DataType::fp64;
  a.op = ReduceOp::max;
  a.send = costs.data();
  a.recv = costs.data();
  a.count = costs.size();
  const Fingerprint fp = make_fingerprint(a, op.agree_seq);
  Status st;
  transport_->begin_operation(fp);
  {
    Context ctx(*transport_, options_, fp, *pool_, std::chrono::steady_clock::now());
    st = run_collective(ctx, a,
                        selected_algorithm(a.kind, sizeof(costs), size(), options_,
                                           transport_->shared_capacity()));
  }
  transport_->end_operation();
  if (!st.ok()) return st.with_context("choosing between flat and hierarchical");
  choice_.decide(op.kind, bytes, costs);
  log::debug("rank {}: {} of {} bytes runs {} (hierarchical {:.1f} us, flat {:.1f} us)", rank(),
             to_string(op.kind), bytes, costs[1] < costs[0] ? "flat" : "hierarchically",
             costs[0] * 1e6, costs[1] * 1e6);
  return Status();
}

Status CommunicatorImpl::p2p_deadline_passed(const WorkImpl& w, const Op& op) {
  (void)w;
  auto secs = std::chrono::duration<double>(options_.timeout).count();
  Status st(ErrorCode::timeout,
            fmt::format("rank {}: {} of {} bytes {} {} (tag {}) timed out after {:g} s", rank(),
                        op.kind == OpKind::send ? "send" : "recv", op.bytes,
                        op.kind == OpKind::send ? "to" : "from",
                        op.peer == kAnySource ? "any rank" : fmt::format("rank {}", op.peer),
                        op.tag, secs));
  const bool first = broken().ok();
  set_broken(st);
  if (first) dump_flight_record(st);
  return st;
}

Status CommunicatorImpl::execute(Op& op) {
  if (is_broken_.load(std::memory_order_acquire)) {
    const Status b = broken();
    recorder_->mark_ended(op.record, b);  // also gives its slot back to the recorder
    if (op.work) op.work->finish(b);
    return b;
  }
  if (op.p2p) {
    Request& r = op.work->request();
    r.kind = op.kind == OpKind::send ? Request::Kind::send : Request::Kind::recv;
    r.peer = op.peer;
    r.tag = p2p_tag(op.tag);
    r.buf = op.buf;
    r.bytes = op.bytes;
    r.fp.kind = op.kind;
    r.fp.count = op.bytes;
    Op copy = op;
    copy.work.reset();
    op.work->arm_p2p(WorkImpl::Clock::now() + options_.timeout,
                     [this, copy](const WorkImpl& w) { return p2p_deadline_passed(w, copy); });
    // It ends in the transport; snapshots read the Work's state.
    recorder_->mark_posted(op.record, FlightEntry::Clock::now());
    if (op.kind == OpKind::send) {
      transport_->post_send(&r);
    } else {
      transport_->post_recv(&r);
    }
    return Status();
  }
  // Clock reads cost tens of nanoseconds here: one for the start (none when the operation runs
  // at submission) and one for the end, shared by everything that records them.
  const auto started = op.started != std::chrono::steady_clock::time_point{}
                           ? op.started
                           : std::chrono::steady_clock::now();
  if (op.work) op.work->mark_started(started);
  if (op.started == std::chrono::steady_clock::time_point{}) recorder_->mark_running(op.record, started);
  const size_t bytes = op.bytes;
  if (op.choice >= HierarchyChoice::kTrials) {
    const bool h = choice_.hierarchical(op.kind, bytes, op.choice);
    if (h != op.hierarchical) {
      op.hierarchical = h;
      op.algorithm = h ? Algorithm::hierarchical
                       : selected_algorithm(op.kind, bytes, size(), options_,
                                            transport_->shared_capacity());
      recorder_->set_algorithm(op.record, op.algorithm);
    }
  }
  const bool trial = op.choice >= 0 && op.choice < HierarchyChoice::kTrials;
  const auto trial_start = trial ? std::chrono::steady_clock::now() : started;
  Status st;
  if (op.hierarchical) {
    st = hierarchy_->run(op.args, *pool_);
  } else {
    transport_->begin_operation(op.fp);
    {
      Context ctx(*transport_, options_, op.fp, *pool_, started);
      st = run_collective(ctx, op.args, op.algorithm);
    }
    transport_->end_operation();
  }
  if (st.ok()) {
    if (Status broken = transport_->error(); !broken.ok()) st = std::move(broken);
  }
  if (trial && st.ok()) {
    choice_.record(op.kind, bytes, op.choice,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - trial_start).count());
    if (op.agree_seq != 0) st = agree_on_costs(op);
  }
  const auto ended = op.coarse_clock ? coarse_now() : std::chrono::steady_clock::now();
  recorder_->mark_ended(op.record, st, ended);
  if (!st.ok()) {
    st = describe_failure(st, rank(), op.fp);
    const bool first = broken().ok();
    set_broken(st);
    if (first) {
      if (st.code() == ErrorCode::timeout) st = explain_timeout(st, op.fp);
      dump_flight_record(st);
    }
  }
  if (op.work) op.work->finish(st, ended);
  return st;
}


Status CommunicatorImpl::explain_timeout(const Status& st, const Fingerprint& fp) {
  using Clock = std::chrono::steady_clock;
  if (size() < 2) return st;
  // One key per rank and communicator; each rank writes it at most once (its first failure).
  auto key = [&](int r) { return fmt::format("weft-diag/{:x}/rank{}", token_, r); };
  const double waited = std::chrono::duration<double>(options_.timeout).count();
  nlohmann::json mine = {{"seq", fp.seq}, {"op", fp.describe()}, {"waited_s", waited}};
  if (!store_->set(key(rank()), mine.dump()).ok()) return st;
  // The other ranks that wait in the same collective time out at about the same moment.
  const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(
                                           options_.timeout, std::chrono::milliseconds(2000));
  std::vector<std::optional<nlohmann::json>> reports(static_cast<size_t>(size()));
  while (true) {
    bool all = true;
    for (int r = 0; r < size(); ++r) {
      auto& rep = reports[static_cast<size_t>(r)];
      if (rep) continue;
      auto have = store_->check({key(r)});
      if (have.ok() && have.value()) {
        auto text = store_->get_string(key(r), std::chrono::milliseconds(100));
        if (text.ok()) {
          auto j = nlohmann::json::parse(text.value(), nullptr, false);
          if (!j.is_discarded() && j.contains("seq")) rep = std::move(j);
        }
      }
      all = all && rep.has_value();
    }
    if (all || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int> waiting, silent;
  std::string elsewhere;
  for (int r = 0; r < size(); ++r) {
    const auto& rep = reports[static_cast<size_t>(r)];
    if (!rep) {
      silent.push_back(r);
    } else if (rep->value("seq", uint64_t{0}) == fp.seq) {
      waiting.push_back(r);
    } else {
      elsewhere += fmt::format("; rank {} is stuck in {}", r, rep->value("op", std::string("?")));
    }
  }
  std::string text;
  if (!silent.empty()) {
    text = fmt::format("; {} {} not entered {} or {} not responding ({} waiting in it since {:.1f} s)",
                       ranks_phrase(silent), silent.size() == 1 ? "has" : "have", fp.describe(),
                       silent.size() == 1 ? "is" : "are", ranks_phrase(waiting), waited);
  } else if (elsewhere.empty()) {
    text = fmt::format("; every rank is waiting in {}", fp.describe());
  }
  text += elsewhere;
  log::warn("rank {}: {}", rank(), text.substr(2));
  return Status(st.code(), st.message() + text);
}

void CommunicatorImpl::dump_flight_record(const Status& why) {
  log::warn("rank {}: in flight after the failure: {}", rank(), recorder_->pending_summary());
  if (options_.diag_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(options_.diag_dir, ec);
  const auto path = std::filesystem::path(options_.diag_dir) /
                    fmt::format("weft-flight-rank{}-pid{}.json", rank(), ::getpid());
  std::ofstream out(path);
  out << flight_record_json() << "\n";
  if (out) {
    log::warn("rank {}: flight record written to {} ({})", rank(), path.string(),
              to_string(why.code()));
  } else {
    log::warn("rank {}: could not write the flight record to {}", rank(), path.string());
  }
}

std::string CommunicatorImpl::flight_record_json() const {
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::unique_lock<std::mutex> lock(transport_mu_);
  if (transport_ && (transport_name_ == "shm" || transport_name_.starts_with("mixed"))) {
    const TransportCounters c = transport_->counters();
    counters = {{"shm_single_copy_messages", c.single_copy_messages},
                {"shm_single_copy_bytes", c.single_copy_bytes},
                {"shm_single_copy_refused_peers", c.single_copy_refused},
                {"shm_cpu_moves", c.cpu_moves}};
  } else if (transport_ && transport_name_.starts_with("tcp")) {
    counters = {{"tcp_unexpected_bytes_peak", transport_->counters().unexpected_bytes_peak}};
  }
  lock.unlock();
  return recorder_->to_json(rank(), size(), transport_name_, counters);
}

Result<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::split(int color, int key) {
  std::vector<int32_t> all(2 * static_cast<size_t>(size()));
  int32_t mine[2] = {color, key};
  CollectiveArgs a;
  a.kind = OpKind::allgather;
  a.dtype = DataType::int32;
  a.send = mine;
  a.recv = all.data();
  a.count = 2;
  WEFT_RETURN_IF_ERROR(run_blocking(std::move(a)));
  uint64_t split_id = ++split_count_;
  if (color < 0) return std::unique_ptr<CommunicatorImpl>();
  std::vector<std::pair<int32_t, int>> members;
  for (int r = 0; r < size(); ++r) {
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  }
  std::sort(members.begin(), members.end());
  Options o = options_;
  o.size = static_cast<int>(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank()) o.rank = static_cast<int>(i);
  }
  auto child_store = make_prefix_store(fmt::format("split{}/color{}", split_id, color), store_);
  return create(o, std::move(child_store), nullptr, /*allow_hierarchy=*/true, machine_ranks_,
                root_store_);
}

void CommunicatorImpl::abort(const std::string& reason) {
  set_broken(Status(ErrorCode::aborted, fmt::format("rank {}: aborted: {}", rank(), reason)));
}

Status CommunicatorImpl::shutdown() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (shut_down_) return Status();
    shut_down_ = true;
    // Pending operations end by themselves (each is bounded by its timeout).
    cv_waiters_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock, [&] { return queue_.empty() && !running_; });
    cv_waiters_.fetch_sub(1, std::memory_order_relaxed);
    stopping_ = true;
    alarm_set_ = true;
    alarm_.set(std::chrono::nanoseconds(0));
  }
  if (executor_.joinable()) executor_.join();
  if (runner_) {
    // Nothing is queued any more; Works that outlive this communicator no longer reach it.
    std::unique_lock<std::shared_mutex> lock(runner_->mu);
    runner_->impl = nullptr;
  }
  stop_watchdog();
  Status result = broken();
  if (hierarchy_) {
    hierarchy_->shutdown();
    hierarchy_.reset();
  }
  if (transport_) {
    if (result.ok()) transport_->close(options_.timeout);
    std::lock_guard<std::mutex> lock(transport_mu_);
    transport_.reset();
  }
  p2p_in_flight_.clear();
  server_.reset();
  return result;
}

}  // namespace weft
