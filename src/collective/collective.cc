#include "collective/collective.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "collective/algorithms.h"

namespace weft {
namespace {

using Algo = Status (*)(Context&, const CollectiveArgs&);
using A = Algorithm;

// The implementation of `a` for `kind`, or nullptr.
Algo lookup(Algorithm a, OpKind kind) {
  switch (kind) {
    case OpKind::allreduce:
      switch (a) {
        case A::ring: return coll::allreduce_ring;
        case A::recursive_doubling: return coll::allreduce_recursive_doubling;
        case A::halving_doubling: return coll::allreduce_halving_doubling;
        case A::direct: return coll::allreduce_direct;
        case A::shm_direct: return coll::allreduce_shared;
        default: return nullptr;
      }
    case OpKind::reduce_scatter:
      switch (a) {
        case A::ring: return coll::reduce_scatter_ring;
        case A::halving_doubling: return coll::reduce_scatter_halving_doubling;
        case A::direct: return coll::reduce_scatter_direct;
        case A::shm_direct: return coll::reduce_scatter_shared;
        default: return nullptr;
      }
    case OpKind::allgather:
      switch (a) {
        case A::ring: return coll::allgather_ring;
        case A::recursive_doubling: return coll::allgather_recursive_doubling;
        case A::direct: return coll::allgather_direct;
        case A::shm_direct: return coll::allgather_shared;
        default: return nullptr;
      }
    case OpKind::allgatherv:
      switch (a) {
        case A::ring: return coll::allgather_ring;
        case A::direct: return coll::allgather_direct;
        case A::shm_direct: return coll::allgather_shared;
        default: return nullptr;
      }
    case OpKind::broadcast:
      switch (a) {
        case A::binomial: return coll::broadcast_binomial;
        case A::ring: return coll::broadcast_ring;
        case A::direct: return coll::broadcast_direct;
        case A::shm_direct: return coll::broadcast_shared;
        default: return nullptr;
      }
    case OpKind::reduce:
      switch (a) {
        case A::binomial: return coll::reduce_binomial;
        case A::ring: return coll::reduce_ring;
        case A::direct: return coll::reduce_direct;
        case A::shm_direct: return coll::reduce_shared;
        default: return nullptr;
      }
    case OpKind::gather:
      switch (a) {
        case A::binomial: return coll::gather_binomial;
        case A::direct: return coll::gather_direct;
        case A::shm_direct: return coll::gather_shared;
        default: return nullptr;
      }
    case OpKind::scatter:
      switch (a) {
        case A::binomial: return coll::scatter_binomial;
        case A::direct: return coll::scatter_direct;
        case A::shm_direct: return coll::scatter_shared;
        default: return nullptr;
      }
    case OpKind::alltoall:
    case OpKind::alltoallv:
      switch (a) {
        case A::pairwise: return coll::alltoall_pairwise;
        case A::direct: return coll::alltoall_direct;
        case A::shm_direct: return kind == OpKind::alltoall ? coll::alltoall_shared : nullptr;
        default: return nullptr;
      }
    case OpKind::barrier:
      switch (a) {
        case A::dissemination: return coll::barrier_dissemination;
        case A::binomial: return coll::barrier_binomial;
        case A::direct: return coll::barrier_direct;
        case A::shm_direct: return coll::barrier_shared;
        default: return nullptr;
      }
    case OpKind::sparse_allreduce:
      switch (a) {
        case A::automatic:  // chosen inside, from the ranks' row counts
        case A::gather_merge:
        case A::dense: return coll::sparse_allreduce;
        default: return nullptr;
      }
    case OpKind::send:
    case OpKind::recv:
      return nullptr;
  }
  return nullptr;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;

// Thresholds: docs/algorithms.md explains them.
Algorithm automatic_choice(OpKind kind, size_t bytes, int n) {
  switch (kind) {
    case OpKind::allreduce:
      if (n <= 2 && bytes <= 16 * KiB) return A::direct;
      // Up to 64 KiB the whole vector in log2 n exchanges beats halving-doubling's 2 log2 n
      // (docs/algorithms.md: 32-64 KiB, 2 and 4 ranks, shm and TCP).
      if (bytes <= 64 * KiB) return A::recursive_doubling;
      // Fewer dependent steps than the ring (2 log n vs 2(n-1)) also matter when ranks share
      // cores: each step waits for its partner to be scheduled.
      if (bytes <= 256 * KiB || (is_power_of_two(n) && bytes <= (n >= 4 ? 4 : 1) * MiB)) {
        return A::halving_doubling;
      }
      return A::ring;
    case OpKind::reduce_scatter:
      if (bytes <= 16 * KiB) return A::direct;
      if (is_power_of_two(n) && bytes <= 1 * MiB) return A::halving_doubling;
      return A::ring;
    case OpKind::allgather:
      return bytes <= 64 * KiB ? A::recursive_doubling : A::ring;
    case OpKind::allgatherv:
      return bytes <= 16 * KiB ? A::direct : A::ring;
    case OpKind::broadcast:
      if (n <= 2) return A::direct;
      return bytes <= 64 * KiB ? A::binomial : A::ring;
    case OpKind::reduce:
      if (n <= 2) return A::direct;
      return bytes <= 64 * KiB ? A::binomial : A::ring;
    case OpKind::gather:
    case OpKind::scatter:
      return bytes <= 256 * KiB ? A::binomial : A::direct;
    case OpKind::alltoall:
      return bytes <= 4 * KiB ? A::direct : A::pairwise;
    case OpKind::alltoallv:
      return A::pairwise;  // per-rank sizes differ, and every rank must choose alike
    case OpKind::barrier:
      return A::dissemination;
    case OpKind::sparse_allreduce:
      return A::automatic;  // sparse_allreduce.cc chooses once the row counts are known
    case OpKind::send:
    case OpKind::recv:
      break;
  }
  return A::direct;
}

}  // namespace

bool collective_implements(Algorithm algorithm, OpKind kind) {
  if (kind == OpKind::send || kind == OpKind::recv) return false;
  return algorithm == Algorithm::automatic || lookup(algorithm, kind) != nullptr;
}

Algorithm selected_algorithm(OpKind kind, size_t bytes, int world_size, const Options& options,
                             size_t shared_capacity) {
  // Shared buffers hold one rank's whole input; every kind publishes at most `bytes` per rank.
  const bool shared = shared_capacity > 0 && bytes <= shared_capacity && world_size > 1 &&
                      lookup(A::shm_direct, kind) != nullptr;
  const Algorithm forced = options.algorithm(kind);
  if (forced == A::shm_direct && !shared) return automatic_choice(kind, bytes, world_size);
  if (forced != Algorithm::automatic && lookup(forced, kind) != nullptr) return forced;
  if (shared) return A::shm_direct;
  return automatic_choice(kind, bytes, world_size);
}

size_t payload_bytes(const CollectiveArgs& args, int world_size) {
  const size_t es = args.elem_size();
  const size_t n = static_cast<size_t>(world_size);
  switch (args.kind) {
    case OpKind::allreduce:
    case OpKind::broadcast:
    case OpKind::reduce:
      return args.count * es;
    case OpKind::allgather:
    case OpKind::reduce_scatter:
    case OpKind::gather:
    case OpKind::scatter:
    case OpKind::alltoall:
      return n * args.count * es;
    case OpKind::allgatherv:
      return std::accumulate(args.recv_counts.begin(), args.recv_counts.end(), size_t{0}) * es;
    case OpKind::alltoallv:
      return std::max(
                 std::accumulate(args.send_counts.begin(), args.send_counts.end(), size_t{0}),
                 std::accumulate(args.recv_counts.begin(), args.recv_counts.end(), size_t{0})) *
             es;
    case OpKind::sparse_allreduce:
      return args.count * args.row_width * es;  // this rank's rows
    case OpKind::barrier:
    case OpKind::send:
    case OpKind::recv:
      return 0;
  }
  return 0;
}

Status run_collective(Context& ctx, const CollectiveArgs& args) {
  return run_collective(ctx, args,
                        selected_algorithm(args.kind, payload_bytes(args, ctx.size()), ctx.size(),
                                           ctx.options(), ctx.shared_capacity()));
}

Status run_collective(Context& ctx, const CollectiveArgs& args, Algorithm a) {
  Algo algo = lookup(a, args.kind);
  if (algo == nullptr) {
    return Status(ErrorCode::internal,
                  fmt::format("rank {}: {}: no algorithm for this collective", ctx.rank(),
                              ctx.fingerprint().describe()));
  }
  return algo(ctx, args);
}

Status run_nested(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  return run_collective(ctx, args,
                        selected_algorithm(args.kind, payload_bytes(args, n), n, ctx.options(), 0));
}

}  // namespace weft
