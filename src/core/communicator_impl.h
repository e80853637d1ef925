// CommunicatorImpl: the engine behind weft::Communicator.
//
// Operations run in call order, like a stream. A blocking collective (run_blocking) or a
// point-to-point post submitted while nothing is queued or running runs inline on the calling
// thread (no hand-off for the common case); an async collective, and anything submitted behind
// other work, is queued for the executor thread (started on first use), so *_async returns at
// once. A caller that waits without a timeout on a Work whose operation is still queued runs the
// queue up to it itself when no thread is executing one (run_queued_through), so "start, then
// wait" costs no hand-off. For that the idle executor is not woken at once: submit sets its
// alarm executor_delay_ (50 us to 1.6 ms, adapted to whether callers wait at once) ahead, and an
// operation nobody waits for starts then (see Alarm). A collective runs to completion before the
// next starts. A point-to-point operation only posts its request, so sends and receives of one
// rank can be in flight together. Any failed operation fails the transport (which tells the
// peers) and leaves the communicator broken.
//
// Files: communicator_impl.cc (creation, split, shutdown), op_queue.cc (the queue, the executor,
// running an operation), diagnostics.cc (watchdog, `weft diag` responder, timeout explanation,
// flight-record dumps), fault_tolerance.cc (revoke, agree, shrink, grow, join). The transport
// comes from transport/factory.h: core names no transport implementation.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <thread>

#include "base/clock.h"
#include "base/mutex.h"
#include "collective/context.h"
#include "core/flight_recorder.h"
#include "core/link_security.h"
#include "core/hierarchy.h"
#include "core/metrics.h"
#include "core/op.h"
#include "core/work_impl.h"
#include "runtime/alarm.h"
#include "runtime/buffer_pool.h"
#include "transport/transport.h"
#include "weft/communicator.h"
#include "weft/options.h"
#include "weft/store.h"

namespace weft {

class CommunicatorImpl {
 public:
  // Options must carry rank and size. `server` (if any) is the store server this rank hosts.
  // With transport=auto and ranks on several hosts (some with more than one rank), it also builds
  // the Hierarchy that runs allreduce, allgather, reduce_scatter and broadcast inside hosts over
  // shared memory and between them over TCP (not for the hierarchy's own sub-communicators).
  // `machine_ranks`: ranks of the whole job on this machine (0: count them here), which decides
  // whether waiting ranks may spin (host ids may split one machine into pretend hosts).
  // `root_store`: the store of the job this communicator descends from (split, shrink, grow);
  // null: `store` itself. Communicators with allow_hierarchy (all but the hierarchy's own) answer
  // `weft diag` through it (see start_diag_responder).
  static Result<std::unique_ptr<CommunicatorImpl>> create(const Options& options,
                                                          std::shared_ptr<Store> store,
                                                          std::unique_ptr<TcpStoreServer> server,
                                                          bool allow_hierarchy = true,
                                                          int machine_ranks = 0,
                                                          std::shared_ptr<Store> root_store = nullptr,
                                                          LinkSecurity security = {});
  ~CommunicatorImpl();

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  const Options& options() const { return options_; }

  // `args` has been validated. Queues it for the executor thread and returns its Work at once.
  std::shared_ptr<WorkImpl> submit_collective(CollectiveArgs args) EXCLUDES(mu_);
  // The blocking form: runs on the calling thread without a Work when nothing is queued or
  // running (the common case), else submits and waits.
  Status run_blocking(CollectiveArgs&& args) EXCLUDES(mu_);
  std::shared_ptr<WorkImpl> submit_p2p(OpKind kind, void* buf, size_t bytes, int peer, uint32_t tag)
      EXCLUDES(mu_);
  // Runs queued operations on the calling thread, in order, through the one of `w`, while no
  // other thread is executing one. Returns once `w`'s operation has run or been started (or is
  // not queued), or as soon as another thread is executing an operation.
  void run_queued_through(const WorkImpl* w) EXCLUDES(mu_);
  // An error Work, already finished (bad arguments, broken communicator).
  static std::shared_ptr<WorkImpl> failed_work(Status st);
  Status broken() const EXCLUDES(mu_);

  Result<std::unique_ptr<CommunicatorImpl>> split(int color, int key) EXCLUDES(mu_);
  void abort(const std::string& reason) EXCLUDES(mu_);
  Status shutdown() EXCLUDES(mu_, watch_mu_, transport_mu_);

  // This rank's recent operations as JSON (FlightRecorder::to_json).
  std::string flight_record_json() const EXCLUDES(transport_mu_);
  // This communicator's metrics in the Prometheus text format (core/metrics_export.h); only
  // weft_build_info when Options::metrics is off.
  std::string metrics_text() const EXCLUDES(transport_mu_);

  // Fault tolerance (contracts in weft/communicator.h). agree, shrink and grow go through the
  // store, so they work on a communicator whose transport has failed.
  void revoke();
  Result<Agreement> agree(uint64_t flag);
  Result<std::unique_ptr<CommunicatorImpl>> shrink();
  Result<std::unique_ptr<CommunicatorImpl>> grow(int count);
  static Result<std::unique_ptr<CommunicatorImpl>> join(const Options& options,
                                                        std::shared_ptr<Store> store,
                                                        LinkSecurity security = {});
  Result<int> pending_joins() const;

 private:
  CommunicatorImpl() = default;
  void set_broken(const Status& st) EXCLUDES(mu_);

  // ---- the operation queue and execution (op_queue.cc) ----
  std::shared_ptr<WorkImpl> submit(Op op) EXCLUDES(mu_);
  // Sequence number, algorithm and flight record of a collective.
  void prepare_collective(Op& op, Clock::time_point queued, bool run_now) REQUIRES(mu_);
  // Runs `op` (a collective to its end; a point-to-point operation is only posted) and finishes
  // its Work if it has one; returns the collective's status.
  Status execute(Op& op) EXCLUDES(mu_);
  Status execute_collective(Op& op, CollectiveOp& c) EXCLUDES(mu_);
  void post_point_to_point(Op& op, const PointToPointOp& p) EXCLUDES(mu_);
  // mu_ held through `lock`: execute(op) with running_ set and mu_ released, then wakes waiters.
  // Not analysed: the analysis cannot tell that the `lock` handed in is the one holding mu_.
  Status execute_unlocked(MutexUniqueLock& lock, Op& op) REQUIRES(mu_) NO_THREAD_SAFETY_ANALYSIS;
  // After the last trial of a class (HierarchyChoice): the ranks' maximum costs, then the choice.
  Status agree_on_costs(OpKind kind, const CollectiveOp& c);
  void executor_loop() EXCLUDES(mu_);
  // A point-to-point operation's deadline passed: breaks the communicator, returns the error.
  Status p2p_deadline_passed(OpKind kind, const PointToPointOp& p) EXCLUDES(mu_);

  // ---- metrics (metrics.cc) ----
  // With Options::metrics: registers this communicator with the process's exposition and, with
  // metrics_addr, starts the endpoint (metrics_serving_: its address).
  Status start_metrics();
  // Publishes the endpoint's address as weft-metrics/rank<job_rank> in the job's store (the
  // job's own communicator, and a process that joined it in place of a launcher rank).
  Status publish_metrics(int job_rank);
  void stop_metrics();
  MetricsSnapshot metrics_snapshot() const EXCLUDES(transport_mu_);

  // ---- diagnostics (diagnostics.cc) ----
  // After a failure: logs what else was in flight and writes the flight record to diag_dir.
  void dump_flight_record(const Status& why);
  // After collective `fp` timed out here: publishes where this rank is through the store, waits
  // briefly for the other ranks' reports and returns `st` with who is behind, e.g.
  // "...; rank 3 has not entered allreduce #812 (ranks 0-2,4-7 waiting in it since 31.2 s)".
  Status explain_timeout(const Status& st, const Fingerprint& fp);
  // Sends heartbeats and checks the peers' every peer_timeout/5 (see Transport::heartbeat).
  void watchdog_loop() EXCLUDES(watch_mu_);
  void start_watchdog();
  // Stops the watchdog and the diag responder; rank 0 marks the communicator closed for diag.
  void stop_watchdog() EXCLUDES(watch_mu_);
  // `weft diag` support: rank 0 registers the communicator under weft-diag/comm/<n> in the root
  // store; every rank's responder thread looks at weft-diag/requests once a second and answers a
  // new request with its flight record under weft-diag/response/<request>/<token>/rank<r>.
  void start_diag_responder();
  void diag_loop() EXCLUDES(watch_mu_);

  // ---- fault tolerance (fault_tolerance.cc) ----
  // The agreement behind agree() and shrink(); `what` names the call in errors.
  Result<Agreement> agree_through_store(uint64_t flag, const char* what);
  // Rank 0 of grow(): waits for `count` joiners and hands them their ranks; returns the prefix
  // (under root_store_) of the grown communicator's store.
  Result<std::string> admit_joiners(int count, uint64_t grow_id);

  Options options_;
  // The job key and mode for the links (core/link_security.h); children inherit it. The TCP
  // Noise wiring takes it from here into TransportSetup (see create()).
  LinkSecurity link_security_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<FlightRecorder> recorder_;
  // Counted when options_.metrics (single writers: core/metrics.h); registered with the
  // exposition under metrics_source_ (0: not registered).
  CommMetrics metrics_;
  uint64_t metrics_source_ = 0;
  std::string metrics_serving_;  // "HOST:PORT" of the process's endpoint, when metrics_addr
  // Not GUARDED_BY(transport_mu_): the threads that use it (callers, executor, watchdog) are done
  // before shutdown() drops it, so they read it without the mutex; only flight_record_json(),
  // which any thread may call at any time, needs it.
  std::unique_ptr<Transport> transport_;
  // Held while shutdown() drops transport_ and while flight_record_json() reads its counters
  // (any thread may ask for the record).
  mutable Mutex transport_mu_;
  std::unique_ptr<Hierarchy> hierarchy_;  // when the job spans hosts (see create)
  HierarchyChoice choice_;                 // admit() under mu_, the rest by the executing thread
  // The store of the communicator this one descends from (split, shrink, grow): joiners meet
  // there (keys weft-join/...).
  std::shared_ptr<Store> root_store_;
  uint64_t split_count_ = 0;  // caller order; collective like split itself
  uint64_t ft_epoch_ = 0;     // agree and shrink calls, in caller order
  uint64_t grow_count_ = 0;   // grow calls, in caller order
  uint64_t token_ = 0;        // this communicator's id, agreed at creation
  std::string transport_name_;  // "shm", "tcp", "mixed (shm to ranks 1,2, tcp to the others)"
  bool transport_has_shm_ = false;  // shared memory carries some traffic (its counters apply)
  int machine_ranks_ = 1;     // ranks of the job on this machine

  // Handed to queued Works so that their waiters can run the queue (cleared by shutdown).
  std::shared_ptr<QueueRunner> runner_;

  // Lock order: mu_, watch_mu_ and transport_mu_ are never held together. Under mu_ only leaf
  // locks are taken: the flight recorder's aux_mu_ and a Work's done_mu_ (finishing a refused
  // Work).
  mutable Mutex mu_;
  // Waiters for running_ to clear or the queue to drain (counted in cv_waiters_).
  std::condition_variable cv_;
  // The idle executor sleeps on alarm_ (executor_idle_); submit sets it kExecutorDelay ahead
  // unless it is set already (alarm_set_: since the executor last woke), shutdown at once. Alarm
  // may be set from any thread and is slept on without mu_.
  Alarm alarm_;
  bool executor_idle_ GUARDED_BY(mu_) = false;
  bool alarm_set_ GUARDED_BY(mu_) = false;
  // kMinExecutorDelay..kMaxExecutorDelay
  std::chrono::microseconds executor_delay_ GUARDED_BY(mu_) = std::chrono::microseconds(50);
  std::deque<Op> queue_ GUARDED_BY(mu_);
  // An operation is executing (inline or on the executor). Set under mu_; a blocking call run
  // inline clears it without mu_ (run_blocking), so threads that wait on cv_ for it count
  // themselves in cv_waiters_ first.
  std::atomic<bool> running_{false};
  std::atomic<int> cv_waiters_{0};
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  Status broken_ GUARDED_BY(mu_);
  std::atomic<bool> is_broken_{false};  // broken_ is set (read without mu_ on the fast path)
  // Started by the first submit; shutdown() takes it out (under mu_, once submit refuses work)
  // and joins it.
  std::jthread executor_ GUARDED_BY(mu_);
  bool shut_down_ GUARDED_BY(mu_) = false;
  Mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ GUARDED_BY(watch_mu_) = false;
  // Started by create() and joined by stop_watchdog(), both on the owner's thread.
  std::jthread watchdog_;
  std::jthread diag_;
  int64_t diag_slot_ = 0;  // rank 0: this communicator's weft-diag/comm/<n>
  int64_t diag_seen_ = 0;  // the last diag request answered (or there before we started)
  // Point-to-point Works whose request the transport may still hold: kept alive until done even
  // if the caller drops its handle. shutdown() takes them over.
  std::vector<std::shared_ptr<WorkImpl>> p2p_in_flight_ GUARDED_BY(mu_);
};

}  // namespace weft
