// The public Communicator: argument packing and validation in front of CommunicatorImpl.
#include "weft/communicator.h"

#include "core/communicator_impl.h"
#include "core/validate.h"
#include "base/log.h"
#include "rendezvous/bootstrap.h"

namespace weft {
namespace {

std::vector<size_t> copy(std::span<const size_t> s) { return {s.begin(), s.end()}; }

CollectiveArgs args(OpKind kind, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op = ReduceOp::sum, int root = 0) {
  return CollectiveArgs::of(kind, send, recv, count, dtype, op, root);
}

}  // namespace

Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::create(const Options& options,
                                                           std::shared_ptr<Store> store) {
  // The caller brought its own store and no key: only a mode that needs none is accepted.
  return create(options, std::move(store), std::string());
}

Result<std::unique_ptr<Communicator>> Communicator::create(const Options& options,
                                                           std::shared_ptr<Store> store,
                                                           const std::string& auth_key_file) {
  // Without a key file only a mode that needs no key is accepted.
  std::shared_ptr<const security::JobKey> key;
  if (!auth_key_file.empty()) {
    auto read = security::read_job_key_file(auth_key_file);
    if (!read.ok()) return read.status().with_context("job key file " + auth_key_file);
    key = std::make_shared<const security::JobKey>(std::move(read).value());
  }
  auto security = resolve_link_security(options.security, std::move(key), /*log_rank0=*/false);
  if (!security.ok()) return security.status();
  auto impl = CommunicatorImpl::create(options, std::move(store), nullptr, true, 0, nullptr,
                                       security.value());
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl.value())));
}

Result<std::unique_ptr<Communicator>> Communicator::from_env() { return from_env(Options()); }

Result<std::unique_ptr<Communicator>> Communicator::from_env(const Options& base) {
  auto launch = detect_launch(current_environment());
  if (!launch.ok()) return launch.status();
  auto options = Options::from_env(base);
  if (!options.ok()) return options.status();
  Options o = options.value();
  if (o.rank < 0) o.rank = launch->rank;
  if (o.size < 0) o.size = launch->size;
  if (o.host_id.empty()) o.host_id = launch->host_id;
  const bool joining = launch->join;
  if (joining && launch->host_store) {
    return Status(ErrorCode::invalid_argument,
                  "WEFT_JOIN=1: a joining rank cannot host the store; run the store outside the "
                  "ranks (weft run or weft store)");
  }
  auto key = read_launch_key(launch.value());
  if (!key.ok()) return key.status();
  auto security = resolve_link_security(o.security, key.value(), o.rank == 0);
  if (!security.ok()) return security.status();
  std::unique_ptr<TcpStoreServer> server;
  auto store = open_launch_store(launch.value(), o.connect_timeout, &server, key.value());
  if (!store.ok()) return store.status();
  if (joining) {
    auto joined = CommunicatorImpl::join(o, std::move(store.value()), security.value());
    if (!joined.ok()) return joined.status();
    log::info("rank {}: joined a running job of {} ranks", joined.value()->rank(),
              joined.value()->size());
    return adopt(std::move(joined.value()));
  }
  auto impl = CommunicatorImpl::create(o, std::move(store.value()), std::move(server),
                                       /*allow_hierarchy=*/true, /*machine_ranks=*/0,
                                       /*root_store=*/nullptr, security.value());
  if (!impl.ok()) return impl.status();
  if (o.rank == 0) log::info("launched by {}", launch->rule);
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl.value())));
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
const Options& Communicator::options() const { return impl_->options(); }

namespace {

WorkPtr start(CommunicatorImpl& impl, CollectiveArgs a) {
  Status st = validate_collective(a, impl.rank(), impl.size());
  if (!st.ok()) return CommunicatorImpl::failed_work(st);
  return impl.submit_collective(std::move(a));
}

WorkPtr start_p2p(CommunicatorImpl& impl, OpKind kind, const void* buf, size_t bytes, int peer,
                  uint32_t tag) {
  Status st = validate_p2p(kind, buf, bytes, peer, impl.rank(), impl.size());
  if (!st.ok()) return CommunicatorImpl::failed_work(st);
  return impl.submit_p2p(kind, const_cast<void*>(buf), bytes, peer, tag);
}

Status finish(const WorkPtr& w) { return w->wait(); }

// The blocking form of start().
Status run(CommunicatorImpl& impl, CollectiveArgs&& a) {
  Status st = validate_collective(a, impl.rank(), impl.size());
  if (!st.ok()) return st;
  return impl.run_blocking(std::move(a));
}

}  // namespace

WorkPtr Communicator::send_async(const void* buf, size_t bytes, int peer, uint32_t tag) {
  return start_p2p(*impl_, OpKind::send, buf, bytes, peer, tag);
}
WorkPtr Communicator::recv_async(void* buf, size_t bytes, int peer, uint32_t tag) {
  return start_p2p(*impl_, OpKind::recv, buf, bytes, peer, tag);
}
Status Communicator::send(const void* buf, size_t bytes, int peer, uint32_t tag) {
  return finish(send_async(buf, bytes, peer, tag));
}
Status Communicator::recv(void* buf, size_t bytes, int peer, uint32_t tag, int* source) {
  WorkPtr w = recv_async(buf, bytes, peer, tag);
  Status st = finish(w);
  if (source != nullptr) *source = st.ok() ? w->source() : -1;
  return st;
}

WorkPtr Communicator::allreduce_async(const void* send, void* recv, size_t count, DataType dtype,
                                      ReduceOp op) {
  return start(*impl_, args(OpKind::allreduce, send, recv, count, dtype, op));
}
WorkPtr Communicator::broadcast_async(void* buf, size_t count, DataType dtype, int root) {
  return start(*impl_, args(OpKind::broadcast, buf, buf, count, dtype, ReduceOp::sum, root));
}
WorkPtr Communicator::reduce_async(const void* send, void* recv, size_t count, DataType dtype,
                                   ReduceOp op, int root) {
  return start(*impl_, args(OpKind::reduce, send, recv, count, dtype, op, root));
}
WorkPtr Communicator::allgather_async(const void* send, void* recv, size_t count, DataType dtype) {
  return start(*impl_, args(OpKind::allgather, send, recv, count, dtype));
}
WorkPtr Communicator::allgatherv_async(const void* send, size_t send_count, void* recv,
                                       std::span<const size_t> recv_counts,
                                       std::span<const size_t> displs, DataType dtype) {
  auto a = args(OpKind::allgatherv, send, recv, send_count, dtype);
  a.recv_counts = copy(recv_counts);
  a.recv_displs = copy(displs);
  return start(*impl_, std::move(a));
}
WorkPtr Communicator::reduce_scatter_async(const void* send, void* recv, size_t count,
                                           DataType dtype, ReduceOp op) {
  return start(*impl_, args(OpKind::reduce_scatter, send, recv, count, dtype, op));
}
WorkPtr Communicator::gather_async(const void* send, void* recv, size_t count, DataType dtype,
                                   int root) {
  return start(*impl_, args(OpKind::gather, send, recv, count, dtype, ReduceOp::sum, root));
}
WorkPtr Communicator::scatter_async(const void* send, void* recv, size_t count, DataType dtype,
                                    int root) {
  return start(*impl_, args(OpKind::scatter, send, recv, count, dtype, ReduceOp::sum, root));
}
WorkPtr Communicator::alltoall_async(const void* send, void* recv, size_t count, DataType dtype) {
  return start(*impl_, args(OpKind::alltoall, send, recv, count, dtype));
}
WorkPtr Communicator::alltoallv_async(const void* send, std::span<const size_t> send_counts,
                                      std::span<const size_t> send_displs, void* recv,
                                      std::span<const size_t> recv_counts,
                                      std::span<const size_t> recv_displs, DataType dtype) {
  auto a = args(OpKind::alltoallv, send, recv, 0, dtype);
  a.send_counts = copy(send_counts);
  a.send_displs = copy(send_displs);
  a.recv_counts = copy(recv_counts);
  a.recv_displs = copy(recv_displs);
  return start(*impl_, std::move(a));
}
WorkPtr Communicator::barrier_async() {
  return start(*impl_, args(OpKind::barrier, nullptr, nullptr, 0, DataType::uint8));
}

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                               ReduceOp op) {
  return run(*impl_, args(OpKind::allreduce, send, recv, count, dtype, op));
}
Status Communicator::broadcast(void* buf, size_t count, DataType dtype, int root) {
  return run(*impl_, args(OpKind::broadcast, buf, buf, count, dtype, ReduceOp::sum, root));
}
Status Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype,
                            ReduceOp op, int root) {
  return run(*impl_, args(OpKind::reduce, send, recv, count, dtype, op, root));
}
Status Communicator::allgather(const void* send, void* recv, size_t count, DataType dtype) {
  return run(*impl_, args(OpKind::allgather, send, recv, count, dtype));
}
Status Communicator::allgatherv(const void* send, size_t send_count, void* recv,
                                std::span<const size_t> recv_counts,
                                std::span<const size_t> displs, DataType dtype) {
  return finish(allgatherv_async(send, send_count, recv, recv_counts, displs, dtype));
}
Status Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType dtype,
                                    ReduceOp op) {
  return run(*impl_, args(OpKind::reduce_scatter, send, recv, count, dtype, op));
}
Status Communicator::gather(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return run(*impl_, args(OpKind::gather, send, recv, count, dtype, ReduceOp::sum, root));
}
Status Communicator::scatter(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return run(*impl_, args(OpKind::scatter, send, recv, count, dtype, ReduceOp::sum, root));
}
Status Communicator::alltoall(const void* send, void* recv, size_t count, DataType dtype) {
  return run(*impl_, args(OpKind::alltoall, send, recv, count, dtype));
}
Status Communicator::alltoallv(const void* send, std::span<const size_t> send_counts,
                               std::span<const size_t> send_displs, void* recv,
                               std::span<const size_t> recv_counts,
                               std::span<const size_t> recv_displs, DataType dtype) {
  return finish(alltoallv_async(send, send_counts, send_displs, recv, recv_counts, recv_displs,
                                dtype));
}
Status Communicator::barrier() {
  return run(*impl_, args(OpKind::barrier, nullptr, nullptr, 0, DataType::uint8));
}

namespace {

CollectiveArgs sparse_args(const int64_t* indices, const void* values, size_t nnz,
                           size_t num_rows, size_t row_width, DataType dtype, ReduceOp op,
                           SparseRows* out) {
  auto a = args(OpKind::sparse_allreduce, values, nullptr, nnz, dtype, op);
  a.indices = indices;
  a.num_rows = num_rows;
  a.row_width = row_width;
  a.sparse_out = out;
  return a;
}

}  // namespace

WorkPtr Communicator::sparse_allreduce_async(const int64_t* indices, const void* values,
                                             size_t nnz, size_t num_rows, size_t row_width,
                                             DataType dtype, ReduceOp op, SparseRows* out) {
  return start(*impl_, sparse_args(indices, values, nnz, num_rows, row_width, dtype, op, out));
}
Status Communicator::sparse_allreduce(const int64_t* indices, const void* values, size_t nnz,
                                      size_t num_rows, size_t row_width, DataType dtype,
                                      ReduceOp op, SparseRows* out) {
  return run(*impl_, sparse_args(indices, values, nnz, num_rows, row_width, dtype, op, out));
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  auto child = impl_->split(color, key);
  if (!child.ok()) return child.status();
  if (!child.value()) return std::unique_ptr<Communicator>();
  return std::unique_ptr<Communicator>(new Communicator(std::move(child.value())));
}

void Communicator::abort(const std::string& reason) { impl_->abort(reason); }
Status Communicator::shutdown() { return impl_->shutdown(); }

std::string Communicator::flight_record_json() const { return impl_->flight_record_json(); }

std::string Communicator::metrics() const { return impl_->metrics_text(); }

namespace {

Result<std::unique_ptr<Communicator>> wrap(Result<std::unique_ptr<CommunicatorImpl>> impl,
                                           std::unique_ptr<Communicator> (*make)(
                                               std::unique_ptr<CommunicatorImpl>)) {
  if (!impl.ok()) return impl.status();
  return make(std::move(impl.value()));
}

}  // namespace

std::unique_ptr<Communicator> Communicator::adopt(std::unique_ptr<CommunicatorImpl> impl) {
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

void Communicator::revoke() { impl_->revoke(); }
Result<Agreement> Communicator::agree(uint64_t flag) { return impl_->agree(flag); }
Result<std::unique_ptr<Communicator>> Communicator::shrink() { return wrap(impl_->shrink(), &adopt); }
Result<std::unique_ptr<Communicator>> Communicator::grow(int count) {
  return wrap(impl_->grow(count), &adopt);
}
Result<std::unique_ptr<Communicator>> Communicator::join(const Options& options,
                                                         std::shared_ptr<Store> store) {
  return wrap(CommunicatorImpl::join(options, std::move(store)), &adopt);
}
Result<int> Communicator::pending_joins() const { return impl_->pending_joins(); }

}  // namespace weft
