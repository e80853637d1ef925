// CommunicatorImpl's operation queue: submission, the blocking fast path, the executor thread,
// and running one operation (the contract is in communicator_impl.h).
#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"
#include "collective/collective.h"
#include "core/communicator_impl.h"

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

std::shared_ptr<WorkImpl> CommunicatorImpl::submit_collective(CollectiveArgs args) {
  Op op;
  op.kind = args.kind;
  op.body.emplace<CollectiveOp>().args = std::move(args);
  return submit(std::move(op));
}

std::shared_ptr<WorkImpl> CommunicatorImpl::submit_p2p(OpKind kind, void* buf, size_t bytes,
                                                       int peer, uint32_t tag) {
  Op op;
  op.kind = kind;
  op.body = PointToPointOp{buf, bytes, peer, tag};
  return submit(std::move(op));
}

void CommunicatorImpl::prepare_collective(Op& op, Clock::time_point queued, bool run_now) {
  CollectiveOp& c = std::get<CollectiveOp>(op.body);
  c.fp = make_fingerprint(c.args, ++next_seq_);
  c.hierarchical = hierarchy_ && Hierarchy::handles(c.args, options_);
  c.bytes = payload_bytes(c.args, size());
  const size_t bytes = c.bytes;
  if (c.hierarchical && options_.algorithm(op.kind) != Algorithm::hierarchical) {
    // Left to auto: flat or hierarchical by measured cost. Later calls are settled again when
    // they run (the agreement may come between).
    c.choice = choice_.admit(op.kind, bytes);
    if (c.choice == HierarchyChoice::kTrials - 1) c.agree_seq = ++next_seq_;
    c.hierarchical = choice_.hierarchical(op.kind, bytes, c.choice);
  }
  c.algorithm = c.hierarchical ? Algorithm::hierarchical
                               : selected_algorithm(c.args.kind, bytes, size(), options_,
                                                    transport_->shared_capacity());
  // Run at once: recorded as running from the start (one recorder update less).
  if (run_now) op.started = queued;
  op.record = recorder_->add_collective(op.kind, c.fp.dtype, c.fp.op, c.fp.root, c.fp.count,
                                        c.fp.seq, c.algorithm, queued, run_now);
}

Status CommunicatorImpl::run_blocking(CollectiveArgs&& args) {
  Op op;
  op.kind = args.kind;
  CollectiveOp& c = op.body.emplace<CollectiveOp>();
  c.args = std::move(args);
  MutexUniqueLock lock(mu_);
  if (!broken_.ok() || shut_down_ || !queue_.empty() || running_) {
    lock.unlock();
    return submit(std::move(op))->wait(std::chrono::milliseconds::max());
  }
  // Nothing ahead of it: run here, with no Work to allocate, finish and wait on, and stamp it
  // with the coarse clock (no Work reports its times; see coarse_now).
  c.coarse_clock = true;
  prepare_collective(op, coarse_now(), true);
  running_.store(true, std::memory_order_relaxed);
  lock.unlock();
  Status st = execute(op);
  // Done without taking mu_ again when nobody waits on cv_ (the common case): a waiter counts
  // itself in cv_waiters_ before it looks at running_, and this looks at cv_waiters_ after
  // clearing running_, so either it sees running_ cleared or this sees it and wakes it.
  running_.store(false, std::memory_order_seq_cst);
  if (cv_waiters_.load(std::memory_order_seq_cst) != 0) {
    MutexLock relock(mu_);
    cv_.notify_all();
  }
  return st;
}

Status CommunicatorImpl::execute_unlocked(MutexUniqueLock& lock, Op& op) {
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
  MutexUniqueLock lock(mu_);
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
  op.work = std::make_shared<WorkImpl>(op.p2p());
  auto work = op.work;
  MutexUniqueLock lock(mu_);
  if (!broken_.ok()) {
    if (options_.metrics) metrics_.count_error(broken_.code());
    work->finish(broken_);
    return work;
  }
  if (shut_down_) {
    work->finish(
        Status(ErrorCode::aborted, fmt::format("rank {}: communicator is shut down", rank())));
    return work;
  }
  const auto queued = Clock::now();
  // Posting a point-to-point operation never blocks, so it runs here when nothing is ahead of
  // it. A collective goes to the executor thread even then: the caller must get its Work back at
  // once, to compute meanwhile or to post the messages a peer needs before it can join (an
  // allreduce_async followed by a send that the peer receives before its allreduce).
  const auto* p2p = std::get_if<PointToPointOp>(&op.body);
  const bool run_now = p2p != nullptr && queue_.empty() && !running_;
  if (p2p == nullptr) {
    prepare_collective(op, queued, run_now);
  } else {
    FlightEntry entry;
    entry.kind = op.kind;
    entry.queued = queued;
    entry.count = p2p->bytes;
    entry.peer = p2p->peer;
    entry.tag = p2p->tag;
    entry.work = work;
    if (options_.metrics) metrics_.count_p2p(op.kind, p2p->bytes);
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
    executor_ = std::jthread([this] { executor_loop(); });
  } else if (executor_idle_ && !alarm_set_) {
    alarm_set_ = true;
    alarm_.set(executor_delay_);
  }
  return work;
}

void CommunicatorImpl::executor_loop() {
  MutexUniqueLock lock(mu_);
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
      cv_.wait(lock.native(), [&] { return !running_.load(std::memory_order_seq_cst); });
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

Status CommunicatorImpl::agree_on_costs(OpKind kind, const CollectiveOp& c) {
  const size_t bytes = c.bytes;
  std::array<double, 2> costs = choice_.costs(kind, bytes);
  CollectiveArgs a;
  a.kind = OpKind::allreduce;
  a.dtype = DataType::fp64;
  a.op = ReduceOp::max;
  a.send = costs.data();
  a.recv = costs.data();
  a.count = costs.size();
  const Fingerprint fp = make_fingerprint(a, c.agree_seq);
  Status st;
  transport_->begin_operation(fp);
  {
    Context ctx(*transport_, options_, fp, *pool_, Clock::now());
    st = run_collective(
        ctx, a,
        selected_algorithm(a.kind, sizeof(costs), size(), options_, transport_->shared_capacity()));
  }
  transport_->end_operation();
  if (!st.ok()) return st.with_context("choosing between flat and hierarchical");
  choice_.decide(kind, bytes, costs);
  log::debug("rank {}: {} of {} bytes runs {} (hierarchical {:.1f} us, flat {:.1f} us)", rank(),
             to_string(kind), bytes, costs[1] < costs[0] ? "flat" : "hierarchically",
             costs[0] * 1e6, costs[1] * 1e6);
  return Status();
}

Status CommunicatorImpl::p2p_deadline_passed(OpKind kind, const PointToPointOp& p) {
  auto secs = std::chrono::duration<double>(options_.timeout).count();
  Status st(
      ErrorCode::timeout,
      fmt::format("rank {}: {} of {} bytes {} {} (tag {}) Timed out after {:g} s", rank(),
                  kind == OpKind::send ? "send" : "recv", p.bytes,
                  kind == OpKind::send ? "to" : "from",
                  p.peer == kAnySource ? "any rank" : fmt::format("rank {}", p.peer), p.tag, secs));
  if (options_.metrics) metrics_.count_error(st.code());
  const bool first = broken().ok();
  set_broken(st);
  if (first) dump_flight_record(st);
  return st;
}

Status CommunicatorImpl::execute(Op& op) {
  if (is_broken_.load(std::memory_order_acquire)) {
    const Status b = broken();
    recorder_->mark_ended(op.record, b);  // also gives its slot back to the recorder
    if (options_.metrics) metrics_.count_error(b.code());
    if (op.work) op.work->finish(b);
    return b;
  }
  if (auto* p = std::get_if<PointToPointOp>(&op.body)) {
    post_point_to_point(op, *p);
    return Status();
  }
  return execute_collective(op, std::get<CollectiveOp>(op.body));
}

void CommunicatorImpl::post_point_to_point(Op& op, const PointToPointOp& p) {
  Request& r = op.work->request();
  r.kind = op.kind == OpKind::send ? Request::Kind::send : Request::Kind::recv;
  r.peer = p.peer;
  r.tag = p2p_tag(p.tag);
  r.buf = p.buf;
  r.bytes = p.bytes;
  r.fp.kind = op.kind;
  r.fp.count = p.bytes;
  op.work->arm_p2p(
      WorkImpl::Clock::now() + options_.timeout,
      [this, kind = op.kind, p](const WorkImpl&) { return p2p_deadline_passed(kind, p); });
  // It ends in the transport; snapshots read the Work's state.
  recorder_->mark_posted(op.record, FlightEntry::Clock::now());
  if (op.kind == OpKind::send) {
    transport_->post_send(&r);
  } else {
    transport_->post_recv(&r);
  }
}

Status CommunicatorImpl::execute_collective(Op& op, CollectiveOp& c) {
  // Clock reads cost tens of nanoseconds here: one for the start (none when the operation runs
  // at submission) and one for the end, shared by everything that records them.
  const auto started = op.started != Clock::time_point{} ? op.started : Clock::now();
  if (op.work) op.work->mark_started(started);
  if (op.started == Clock::time_point{}) recorder_->mark_running(op.record, started);
  const size_t bytes = c.bytes;
  if (c.choice >= HierarchyChoice::kTrials) {
    const bool h = choice_.hierarchical(op.kind, bytes, c.choice);
    if (h != c.hierarchical) {
      c.hierarchical = h;
      c.algorithm =
          h ? Algorithm::hierarchical
            : selected_algorithm(op.kind, bytes, size(), options_, transport_->shared_capacity());
      recorder_->set_algorithm(op.record, c.algorithm);
    }
  }
  const bool trial = c.choice >= 0 && c.choice < HierarchyChoice::kTrials;
  const auto trial_start = trial ? Clock::now() : started;
  Status st;
  if (c.hierarchical) {
    st = hierarchy_->run(c.args, *pool_);
  } else {
    transport_->begin_operation(c.fp);
    {
      Context ctx(*transport_, options_, c.fp, *pool_, started);
      st = run_collective(ctx, c.args, c.algorithm);
    }
    transport_->end_operation();
  }
  if (st.ok()) {
    if (Status broken = transport_->error(); !broken.ok()) st = std::move(broken);
  }
  if (trial && st.ok()) {
    choice_.record(op.kind, bytes, c.choice,
                   std::chrono::duration<double>(Clock::now() - trial_start).count());
    if (c.agree_seq != 0) st = agree_on_costs(op.kind, c);
  }
  const auto ended = c.coarse_clock ? coarse_now() : Clock::now();
  recorder_->mark_ended(op.record, st, ended);
  if (options_.metrics) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(ended - started).count();
    metrics_.count_collective(op.kind, c.algorithm, bytes, ns > 0 ? uint64_t(ns) : 0);
    if (!st.ok()) metrics_.count_error(st.code());
  }
  if (!st.ok()) {
    st = describe_failure(st, rank(), c.fp);
    const bool first = broken().ok();
    set_broken(st);
    if (first) {
      if (st.code() == ErrorCode::timeout) st = explain_timeout(st, c.fp);
      dump_flight_record(st);
    }
  }
  if (op.work) op.work->finish(st, ended);
  return st;
}

}  // namespace weft
