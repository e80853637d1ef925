#include "core/hierarchy.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <utility>
#include <cstring>

#include "core/communicator_impl.h"
#include "reduce/reduce.h"
#include "runtime/buffer_pool.h"

namespace weft {
namespace {

// A pooled scratch buffer returned on scope exit.
class Scratch {
 public:
  Scratch(BufferPool& pool, size_t bytes)
      : pool_(pool), bytes_(bytes), p_(pool.try_acquire(bytes)) {}
  ~Scratch() { pool_.release(p_, bytes_); }
  Scratch(const Scratch&) = delete;
  // The error when memory was exhausted (the caller's operation fails with it).
  Status status(int rank) const {
    if (p_ != nullptr || bytes_ == 0) return Status::success();
    return Status(ErrorCode::io, fmt::format("rank {}: hierarchical collective: out of memory: "
                                             "cannot allocate {} bytes of scratch memory",
                                             rank, bytes_));
  }
  Scratch& operator=(const Scratch&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }

 private:
  BufferPool& pool_;
  size_t bytes_;
  void* p_;
};

CollectiveArgs make_args(OpKind kind, const CollectiveArgs& like, const void* send, void* recv,
                         size_t count, int root = 0) {
  CollectiveArgs a;
  a.kind = kind;
  a.dtype = like.dtype;
  a.op = like.op == ReduceOp::avg ? ReduceOp::sum : like.op;
  a.root = root;
  a.send = send;
  a.recv = recv;
  a.count = count;
  return a;
}

// "0=job rank 2, 1=job rank 5": how a sub-communicator's rank numbers map to the job's.
std::string numbering(const std::vector<int>& members) {
  std::string out;
  for (size_t i = 0; i < members.size(); ++i) {
    out += fmt::format("{}{}=job rank {}", i == 0 ? "" : ", ", i, members[i]);
  }
  return out;
}

}  // namespace

// ---- flat or hierarchical -------------------------------------------------------------------------

HierarchyChoice::Class& HierarchyChoice::at(OpKind kind, size_t bytes) {
  return const_cast<Class&>(std::as_const(*this).at(kind, bytes));
}

const HierarchyChoice::Class& HierarchyChoice::at(OpKind kind, size_t bytes) const {
  int k = 0;
  switch (kind) {
    case OpKind::allreduce: k = 0; break;
    case OpKind::allgather: k = 1; break;
    case OpKind::reduce_scatter: k = 2; break;
    default: k = 3; break;  // broadcast
  }
  // Sizes rounded up to a power of two: 2049..4096 bytes are one class.
  return classes_[k][bytes <= 1 ? bytes : std::bit_width(bytes - 1)];
}

int HierarchyChoice::admit(OpKind kind, size_t bytes) {
  Class& c = at(kind, bytes);
  const int index = c.calls;
  if (c.calls < kTrials) ++c.calls;
  return index;
}

bool HierarchyChoice::hierarchical(OpKind kind, size_t bytes, int index) const {
  if (index < kTrials) return index < kTrials / 2;
  return !at(kind, bytes).flat.load(std::memory_order_relaxed);
}

void HierarchyChoice::record(OpKind kind, size_t bytes, int index, double seconds) {
  if (index >= kTrials) return;
  double& best = at(kind, bytes).best[index < kTrials / 2 ? 0 : 1];
  best = std::min(best, seconds);
}

std::array<double, 2> HierarchyChoice::costs(OpKind kind, size_t bytes) const {
  const Class& c = at(kind, bytes);
  return {c.best[0], c.best[1]};
}

void HierarchyChoice::decide(OpKind kind, size_t bytes, const std::array<double, 2>& agreed) {
  at(kind, bytes).flat.store(agreed[1] < agreed[0], std::memory_order_relaxed);
}

// ---- set-up ---------------------------------------------------------------------------------------

Result<std::unique_ptr<Hierarchy>> Hierarchy::create(const HostLayout& layout, int rank,
                                                     const Options& options,
                                                     std::shared_ptr<Store> store,
                                                     int machine_ranks,
                                                     const LinkSecurity& security) {
  std::unique_ptr<Hierarchy> h(new Hierarchy());
  h->layout_ = layout;
  h->rank_ = rank;
  const int host = layout.host_of[static_cast<size_t>(rank)];
  const int li = layout.local_index[static_cast<size_t>(rank)];
  const auto& members = layout.hosts[static_cast<size_t>(host)];

  Options sub = options;
  sub.algorithms = {};  // the sub-communicators choose for themselves
  sub.flight_recorder = std::min<size_t>(options.flight_recorder, 64);
  sub.metrics = false;  // the parent counts the call
  sub.metrics_addr.clear();

  Options local = sub;
  local.rank = li;
  local.size = static_cast<int>(members.size());
  local.transport = TransportKind::shm;
  auto lc = CommunicatorImpl::create(
      local, make_prefix_store(fmt::format("hier/local{}", members.front()), store), nullptr,
      /*allow_hierarchy=*/false, machine_ranks, nullptr, security);
  if (!lc.ok()) return lc.status().with_context(fmt::format("rank {}: host-local communicator", rank));
  h->local_ = std::move(lc.value());
  h->local_names_ = numbering(members);

  // Cross: the li-th rank of every host that has one, in host order.
  Options cross = sub;
  cross.transport = TransportKind::tcp;
  cross.size = 0;
  std::vector<int> cross_members;
  for (const auto& m : layout.hosts) {
    if (static_cast<int>(m.size()) <= li) continue;
    if (m[static_cast<size_t>(li)] == rank) cross.rank = cross.size;
    ++cross.size;
    cross_members.push_back(m[static_cast<size_t>(li)]);
  }
  h->cross_names_ = numbering(cross_members);
  auto cc = CommunicatorImpl::create(
      cross, make_prefix_store(fmt::format("hier/cross{}", li), store), nullptr,
      /*allow_hierarchy=*/false, machine_ranks, nullptr, security);
  if (!cc.ok()) return cc.status().with_context(fmt::format("rank {}: cross-host communicator", rank));
  h->cross_ = std::move(cc.value());
  return h;
}

Hierarchy::~Hierarchy() { shutdown(); }

void Hierarchy::shutdown() {
  if (local_) (void)local_->shutdown();
  if (cross_) (void)cross_->shutdown();
}

void Hierarchy::abort(const std::string& reason) {
  if (local_) local_->abort(reason);
  if (cross_) cross_->abort(reason);
}

bool Hierarchy::handles(const CollectiveArgs& args, const Options& options) {
  switch (args.kind) {
    case OpKind::allreduce:
    case OpKind::allgather:
    case OpKind::reduce_scatter:
    case OpKind::broadcast: {
      const Algorithm a = options.algorithm(args.kind);
      return a == Algorithm::automatic || a == Algorithm::hierarchical;
    }
    default:
      return false;
  }
}

// A sub-communicator's errors number its own ranks: the context says which ranks of the job
// they are.
Status Hierarchy::on_local(const CollectiveArgs& a) {
  return local_->run_blocking(CollectiveArgs(a))
      .with_context(fmt::format("rank {}: host-local step (ranks {} there)", rank_, local_names_));
}

Status Hierarchy::on_cross(const CollectiveArgs& a) {
  return cross_->run_blocking(CollectiveArgs(a))
      .with_context(fmt::format("rank {}: cross-host step (ranks {} there)", rank_, cross_names_));
}

// ---- collectives ----------------------------------------------------------------------------------

Status Hierarchy::run(const CollectiveArgs& args, BufferPool& pool) {
  Status st;
  switch (args.kind) {
    case OpKind::allreduce: st = allreduce(args, pool); break;
    case OpKind::broadcast: st = broadcast(args); break;
    case OpKind::allgather: st = allgather(args, pool); break;
    case OpKind::reduce_scatter: st = reduce_scatter(args, pool); break;
    default:
      return Status(ErrorCode::internal, fmt::format("hierarchy cannot run {}", to_string(args.kind)));
  }
  if (st.ok() && (args.kind == OpKind::allreduce || args.kind == OpKind::reduce_scatter) &&
      args.op == ReduceOp::avg) {
    const size_t count = args.count;
    scale_for_avg(args.recv, count, args.dtype, static_cast<int>(layout_.host_of.size()));
  }
  return st;
}

Status Hierarchy::allreduce(const CollectiveArgs& a, BufferPool& pool) {
  const size_t L = layout_.hosts[static_cast<size_t>(layout_.host_of[static_cast<size_t>(rank_)])].size();
  if (layout_.uniform() && L > 1 && a.count % L == 0 && a.count > 0) {
    // Every local rank owns a slice.
    const size_t slice = a.count / L;
    Scratch s(pool, slice * a.elem_size());
    WEFT_RETURN_IF_ERROR(s.status(rank_));
    WEFT_RETURN_IF_ERROR(on_local(make_args(OpKind::reduce_scatter, a, a.send, s.get(), slice)));
    WEFT_RETURN_IF_ERROR(on_cross(make_args(OpKind::allreduce, a, s.get(), s.get(), slice)));
    return on_local(make_args(OpKind::allgather, a, s.get(), a.recv, slice));
  }
  // Through the leaders.
  WEFT_RETURN_IF_ERROR(on_local(make_args(OpKind::reduce, a, a.send, a.recv, a.count, 0)));
  if (leader()) WEFT_RETURN_IF_ERROR(on_cross(make_args(OpKind::allreduce, a, a.recv, a.recv, a.count)));
  return on_local(make_args(OpKind::broadcast, a, a.recv, a.recv, a.count, 0));
}

Status Hierarchy::broadcast(const CollectiveArgs& a) {
  const int root_host = layout_.host_of[static_cast<size_t>(a.root)];
  const int root_local = layout_.local_index[static_cast<size_t>(a.root)];
  const int host = layout_.host_of[static_cast<size_t>(rank_)];
  // The root's host first gets the data to its leader (every rank there gets it on the way).
  if (host == root_host && root_local != 0) {
    WEFT_RETURN_IF_ERROR(on_local(make_args(OpKind::broadcast, a, a.recv, a.recv, a.count, root_local)));
  }
  if (leader()) {
    // Cross ranks of local index 0 are the hosts in order: the root host's leader is root_host.
    WEFT_RETURN_IF_ERROR(on_cross(make_args(OpKind::broadcast, a, a.recv, a.recv, a.count, root_host)));
  }
  if (host == root_host && root_local != 0) return Status();
  return on_local(make_args(OpKind::broadcast, a, a.recv, a.recv, a.count, 0));
}

// Uniform layouts (H hosts of L ranks): every local rank gathers the blocks of its local index
// across hosts (cross allgather, all L links at once), the host exchanges those bundles (local
// allgather of H blocks each: bundle i holds rank hosts[h][i]'s block at h), and the blocks go
// into global rank order.
Status Hierarchy::allgather_slices(const CollectiveArgs& a, BufferPool& pool) {
  const size_t H = layout_.hosts.size();
  const size_t L = layout_.hosts.front().size();
  const size_t li = static_cast<size_t>(layout_.local_index[static_cast<size_t>(rank_)]);
  const size_t block = a.count * a.elem_size();
  Scratch bundles(pool, L * H * block);
  WEFT_RETURN_IF_ERROR(bundles.status(rank_));
  uint8_t* mine = bundles.get() + li * H * block;
  WEFT_RETURN_IF_ERROR(on_cross(make_args(OpKind::allgather, a, a.send, mine, a.count)));
  // In place: this rank's bundle already sits at its place.
  WEFT_RETURN_IF_ERROR(on_local(make_args(OpKind::allgather, a, mine, bundles.get(), H * a.count)));
  uint8_t* out = static_cast<uint8_t*>(a.recv);
  for (size_t i = 0; i < L && block > 0; ++i) {
    for (size_t h = 0; h < H; ++h) {
      const size_t r = static_cast<size_t>(layout_.hosts[h][i]);
      std::memcpy(out + r * block, bundles.get() + (i * H + h) * block, block);
    }
  }
  return Status();
}

// Uniform layouts: the blocks are regrouped by local index (group i: the blocks of ranks
// hosts[h][i], h in host order), the host reduce_scatters the groups (local rank i gets its
// group summed over the host), and each local index's ranks reduce_scatter that across hosts.
Status Hierarchy::reduce_scatter_slices(const CollectiveArgs& a, BufferPool& pool) {
  const size_t H = layout_.hosts.size();
  const size_t L = layout_.hosts.front().size();
  const size_t block = a.count * a.elem_size();
  Scratch grouped(pool, L * H * block);
  WEFT_RETURN_IF_ERROR(grouped.status(rank_));
  const auto* in = static_cast<const uint8_t*>(a.send);
  for (size_t i = 0; i < L && block > 0; ++i) {
    for (size_t h = 0; h < H; ++h) {
      const size_t r = static_cast<size_t>(layout_.hosts[h][i]);
      std::memcpy(grouped.get() + (i * H + h) * block, in + r * block, block);
    }
  }
  Scratch group(pool, H * block);
  WEFT_RETURN_IF_ERROR(group.status(rank_));
  WEFT_RETURN_IF_ERROR(
      on_local(make_args(OpKind::reduce_scatter, a, grouped.get(), group.get(), H * a.count)));
  return on_cross(make_args(OpKind::reduce_scatter, a, group.get(), a.recv, a.count));
}

Status Hierarchy::allgather(const CollectiveArgs& a, BufferPool& pool) {
  if (slices(a)) return allgather_slices(a, pool);
  const size_t es = a.elem_size();
  const size_t n = layout_.host_of.size();
  const int host = layout_.host_of[static_cast<size_t>(rank_)];
  const size_t L = layout_.hosts[static_cast<size_t>(host)].size();
  const size_t block = a.count * es;
  // Whole hosts, host after host: the leaders' allgatherv result.
  Scratch by_host(pool, n * block);
  WEFT_RETURN_IF_ERROR(by_host.status(rank_));
  std::vector<size_t> host_offset(layout_.hosts.size());
  size_t off = 0;
  for (size_t h = 0; h < layout_.hosts.size(); ++h) {
    host_offset[h] = off;
    off += layout_.hosts[h].size() * a.count;
  }
  uint8_t* mine = by_host.get() + host_offset[static_cast<size_t>(host)] * es;
  // In place, a.send already points at this rank's block of a.recv.
  WEFT_RETURN_IF_ERROR(on_local(make_args(OpKind::gather, a, a.send, mine, a.count, 0)));
  if (leader()) {
    CollectiveArgs g = make_args(OpKind::allgatherv, a, mine, by_host.get(), L * a.count);
    for (size_t h = 0; h < layout_.hosts.size(); ++h) {
      g.recv_counts.push_back(layout_.hosts[h].size() * a.count);
      g.recv_displs.push_back(host_offset[h]);
    }
    // In place: this leader's host block already sits at its displacement.
    WEFT_RETURN_IF_ERROR(on_cross(g));
    uint8_t* out = static_cast<uint8_t*>(a.recv);
    for (size_t r = 0; r < n; ++r) {
      const size_t h = static_cast<size_t>(layout_.host_of[r]);
      const size_t li = static_cast<size_t>(layout_.local_index[r]);
      if (block > 0) std::memcpy(out + r * block, by_host.get() + (host_offset[h] + li * a.count) * es, block);
    }
  }
  return on_local(make_args(OpKind::broadcast, a, a.recv, a.recv, n * a.count, 0));
}

Status Hierarchy::reduce_scatter(const CollectiveArgs& a, BufferPool& pool) {
  if (slices(a)) return reduce_scatter_slices(a, pool);
  const size_t es = a.elem_size();
  const size_t n = layout_.host_of.size();
  const auto& members = layout_.hosts[static_cast<size_t>(layout_.host_of[static_cast<size_t>(rank_)])];
  const size_t total = n * a.count;
  Scratch sum(pool, total * es);
  WEFT_RETURN_IF_ERROR(sum.status(rank_));
  Scratch packed(pool, members.size() * a.count * es);
  WEFT_RETURN_IF_ERROR(packed.status(rank_));
  WEFT_RETURN_IF_ERROR(on_local(make_args(OpKind::reduce, a, a.send, sum.get(), total, 0)));
  if (leader()) {
    WEFT_RETURN_IF_ERROR(on_cross(make_args(OpKind::allreduce, a, sum.get(), sum.get(), total)));
    // This host's blocks, in local order.
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t r = static_cast<size_t>(members[i]);
      if (a.count > 0) {
        std::memcpy(packed.get() + i * a.count * es, sum.get() + r * a.count * es, a.count * es);
      }
    }
  }
  return on_local(make_args(OpKind::scatter, a, packed.get(), a.recv, a.count, 0));
}

}  // namespace weft
