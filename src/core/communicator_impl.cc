#include "core/communicator_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>

#include "base/log.h"
#include "transport/factory.h"
#include "weft/communicator.h"

namespace weft {
namespace {

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

}  // namespace

Result<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::create(
    const Options& options, std::shared_ptr<Store> store, std::unique_ptr<TcpStoreServer> server,
    bool allow_hierarchy, int machine_ranks, std::shared_ptr<Store> root_store,
    LinkSecurity security) {
  WEFT_RETURN_IF_ERROR(options.validate());
  if (options.rank < 0 || options.size <= 0) {
    return Status(ErrorCode::invalid_argument, "Options.rank and Options.size must be set");
  }
  if (!store) return Status(ErrorCode::invalid_argument, "a Store is required");
  log::set_level(options.log_level);
  std::unique_ptr<CommunicatorImpl> c(new CommunicatorImpl());
  c->runner_ = std::make_shared<QueueRunner>(c.get());
  Result<Alarm> alarm = Alarm::create();
  if (!alarm.ok()) return alarm.status();
  c->alarm_ = std::move(alarm).value();
  c->options_ = options;
  c->link_security_ = std::move(security);
  c->store_ = std::move(store);
  c->server_ = std::move(server);
  c->pool_ = std::make_unique<BufferPool>();
  c->recorder_ = std::make_unique<FlightRecorder>(options.flight_recorder);
  if (c->options_.host_id.empty()) c->options_.host_id = default_host_id();
  if (c->rank() == 0) log::info("options: {}", c->options_.describe());

  auto token = agree_token(*c->store_, c->rank(), options.connect_timeout);
  if (!token.ok()) return token.status();
  c->token_ = token.value();
  TransportSetup setup;
  setup.options = c->options_;
  setup.token = c->token_;
  setup.machine_ranks = machine_ranks;
  // The TCP links' handshake and records (docs/security.md); shared memory is not affected.
  switch (c->link_security_.mode) {
    case Security::auth: setup.security = security::SecurityMode::auth; break;
    case Security::encrypt: setup.security = security::SecurityMode::encrypt; break;
    default: setup.security = security::SecurityMode::off; break;
  }
  setup.job_key = c->link_security_.key;
  auto built = make_transport(setup, c->store_, *c->pool_);
  if (!built.ok()) return built.status();
  c->transport_ = std::move(built->transport);
  c->transport_name_ = std::move(built->name);
  c->transport_has_shm_ = built->shm;
  c->machine_ranks_ = built->machine_ranks;
  const std::optional<HostLayout>& layout = built->layout;
  if (allow_hierarchy && layout && layout->host_count() > 1 && layout->max_local() > 1) {
    if (c->rank() == 0) log::info("hierarchical collectives over {}", layout->describe());
    auto h = Hierarchy::create(*layout, c->rank(), c->options_, c->store_, c->machine_ranks_,
                               c->link_security_);
    if (!h.ok()) return h.status();
    c->hierarchy_ = std::move(h.value());
  }
  c->root_store_ = root_store ? std::move(root_store) : c->store_;
  c->start_watchdog();
  if (allow_hierarchy) {
    c->start_diag_responder();
    // The hierarchy's own communicators are not counted apart: their parent counts the call.
    WEFT_RETURN_IF_ERROR(c->start_metrics());
    if (root_store == nullptr) WEFT_RETURN_IF_ERROR(c->publish_metrics(c->rank()));
  }
  return c;
}

CommunicatorImpl::~CommunicatorImpl() { (void)shutdown(); }

std::shared_ptr<WorkImpl> CommunicatorImpl::failed_work(Status st) {
  auto w = std::make_shared<WorkImpl>();
  w->mark_started();
  w->finish(std::move(st));
  return w;
}

Status CommunicatorImpl::broken() const {
  MutexLock lock(mu_);
  return broken_;
}

void CommunicatorImpl::set_broken(const Status& st) {
  {
    MutexLock lock(mu_);
    if (broken_.ok()) broken_ = st;
    is_broken_.store(true, std::memory_order_release);
  }
  transport_->fail(st);
  if (hierarchy_) hierarchy_->abort(st.message());
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
                root_store_, link_security_);
}

void CommunicatorImpl::abort(const std::string& reason) {
  set_broken(Status(ErrorCode::aborted, fmt::format("rank {}: aborted: {}", rank(), reason)));
}

Status CommunicatorImpl::shutdown() {
  stop_metrics();  // the owner's thread, like shutdown itself
  // Taken over under mu_ once submit() refuses work (shut_down_), so nothing else touches them.
  std::jthread executor;
  std::vector<std::shared_ptr<WorkImpl>> p2p_in_flight;
  {
    MutexUniqueLock lock(mu_);
    if (shut_down_) return Status();
    shut_down_ = true;
    // Pending operations end by themselves (each is bounded by its timeout).
    cv_waiters_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return queue_.empty() && !running_; });
    cv_waiters_.fetch_sub(1, std::memory_order_relaxed);
    stopping_ = true;
    alarm_set_ = true;
    alarm_.set(std::chrono::nanoseconds(0));
    executor = std::move(executor_);
    p2p_in_flight.swap(p2p_in_flight_);
  }
  if (executor.joinable()) executor.join();
  if (runner_) {
    // Nothing is queued any more; Works that outlive this communicator no longer reach it.
    WriterMutexLock lock(runner_->mu);
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
    MutexLock lock(transport_mu_);
    transport_.reset();
  }
  p2p_in_flight.clear();
  server_.reset();
  return result;
}

}  // namespace weft
