// Entry point of the collective layer: picks an algorithm for one call and runs it.
//
// The communicator validates the arguments, builds the operation's Fingerprint
// (make_fingerprint), calls Transport::begin_operation, creates a Context and calls
// run_collective on its executing thread. The choice is Options::algorithm(kind) when forced and
// implemented for the kind, else the size-based selector described in docs/algorithms.md. Every
// rank must choose the same algorithm, so the choice depends only on values all ranks agree on
// (kind, counts, world size, options).
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>

#include "collective/context.h"
#include "weft/options.h"

namespace weft {

Status run_collective(Context& ctx, const CollectiveArgs& args);
// The same with the algorithm already chosen (selected_algorithm with the same arguments).
Status run_collective(Context& ctx, const CollectiveArgs& args, Algorithm algorithm);
// A collective run as one step of another one's operation (sparse_allreduce's exchanges): the
// algorithm run_collective would choose, but never through shared buffers, which hold one
// payload per operation.
Status run_nested(Context& ctx, const CollectiveArgs& args);

// The algorithm run_collective runs for a call of `kind` moving `bytes` (see payload_bytes) in a
// group of `world_size` whose transport has shared buffers of `shared_capacity` bytes
// (Transport::shared_capacity; 0: none). Never returns Algorithm::automatic, except for
// sparse_allreduce, which chooses from the ranks' row counts once it has them. shm_direct is chosen
// whenever the payload fits the shared buffers, unless another algorithm is forced; forcing
// shm_direct where it does not apply falls back to the size-based choice.
Algorithm selected_algorithm(OpKind kind, size_t bytes, int world_size, const Options& options,
                             size_t shared_capacity = 0);

// sparse_allreduce's algorithm once the ranks have told each other how many distinct rows they
// hold (`total_rows` together, of a table of `num_rows`): the forced one (gather_merge or dense),
// else by density and world size, from the crossover measured in docs/algorithms.md ("Sparse
// allreduce").
Algorithm sparse_algorithm(uint64_t total_rows, size_t num_rows, int world_size,
                           const Options& options);

// True when collective/ has an implementation of `algorithm` for `kind` (automatic: always).
// Options' algorithm_supports should agree with this table.
bool collective_implements(Algorithm algorithm, OpKind kind);

// The size the selector looks at: the whole vector a call reduces, broadcasts or exchanges —
// count * elem for allreduce, broadcast and reduce; world_size * count * elem for allgather,
// reduce_scatter, gather, scatter and alltoall; the sum of the counts for the v-forms.
size_t payload_bytes(const CollectiveArgs& args, int world_size);

// The Fingerprint of a collective call: fields that do not apply to the kind are normalised (op
// only for reductions, root only for rooted collectives and -1 otherwise; count is the total of
// recv_counts for allgatherv, 0 for alltoallv and barrier, whose per-rank counts differ, and the
// table's element count for sparse_allreduce), so
// ranks agree on it exactly when their calls agree.
// Inline: it is on the path of every call, and a Fingerprint returned through memory from another
// translation unit is reloaded with wide loads that cannot be forwarded from its narrow stores.
inline Fingerprint make_fingerprint(const CollectiveArgs& args, uint64_t seq) {
  const OpKind k = args.kind;
  const bool reduction = k == OpKind::allreduce || k == OpKind::reduce ||
                         k == OpKind::reduce_scatter || k == OpKind::sparse_allreduce;
  const bool rooted = k == OpKind::broadcast || k == OpKind::reduce || k == OpKind::gather ||
                      k == OpKind::scatter;
  Fingerprint fp;
  fp.kind = k;
  fp.dtype = k == OpKind::barrier ? DataType::uint8 : args.dtype;
  fp.op = reduction ? args.op : ReduceOp::sum;
  fp.root = rooted ? args.root : -1;
  if (k == OpKind::allgatherv) {
    fp.count = std::accumulate(args.recv_counts.begin(), args.recv_counts.end(), uint64_t{0});
  } else if (k == OpKind::alltoallv || k == OpKind::barrier) {
    fp.count = 0;
  } else if (k == OpKind::sparse_allreduce) {
    fp.count = args.num_rows * args.row_width;  // the table; ranks' row counts differ
  } else {
    fp.count = args.count;
  }
  fp.seq = seq;
  return fp;
}

}  // namespace weft
