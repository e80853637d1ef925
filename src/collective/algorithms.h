// Every collective algorithm, as a plain function over a Context (see context.h).
//
// Each runs on every rank of the group with matching CollectiveArgs and returns that rank's
// Status. Arguments were validated by the communicator; the buffer conventions, in-place rules
// and cost of each algorithm are in docs/algorithms.md. collective.h picks one per call.
#pragma once

#include "collective/context.h"

namespace weft::coll {

Status allreduce_ring(Context& ctx, const CollectiveArgs& args);
Status allreduce_recursive_doubling(Context& ctx, const CollectiveArgs& args);
Status allreduce_halving_doubling(Context& ctx, const CollectiveArgs& args);
Status allreduce_direct(Context& ctx, const CollectiveArgs& args);

Status reduce_scatter_ring(Context& ctx, const CollectiveArgs& args);
Status reduce_scatter_halving_doubling(Context& ctx, const CollectiveArgs& args);
Status reduce_scatter_direct(Context& ctx, const CollectiveArgs& args);

// Also serve allgatherv (args.recv_counts / recv_displs), except recursive_doubling.
Status allgather_ring(Context& ctx, const CollectiveArgs& args);
Status allgather_recursive_doubling(Context& ctx, const CollectiveArgs& args);
Status allgather_direct(Context& ctx, const CollectiveArgs& args);

Status broadcast_binomial(Context& ctx, const CollectiveArgs& args);
Status broadcast_ring(Context& ctx, const CollectiveArgs& args);
Status broadcast_direct(Context& ctx, const CollectiveArgs& args);

Status reduce_binomial(Context& ctx, const CollectiveArgs& args);
Status reduce_ring(Context& ctx, const CollectiveArgs& args);
Status reduce_direct(Context& ctx, const CollectiveArgs& args);

Status gather_binomial(Context& ctx, const CollectiveArgs& args);
Status gather_direct(Context& ctx, const CollectiveArgs& args);
Status scatter_binomial(Context& ctx, const CollectiveArgs& args);
Status scatter_direct(Context& ctx, const CollectiveArgs& args);

// Also serve alltoallv (all four count/displacement vectors).
Status alltoall_pairwise(Context& ctx, const CollectiveArgs& args);
Status alltoall_direct(Context& ctx, const CollectiveArgs& args);

Status barrier_dissemination(Context& ctx, const CollectiveArgs& args);
Status barrier_binomial(Context& ctx, const CollectiveArgs& args);
Status barrier_direct(Context& ctx, const CollectiveArgs& args);

// Sum of the rows each rank holds (sparse_allreduce.cc): gather_merge or dense, as forced or
// chosen by density once the ranks' row counts are exchanged.
Status sparse_allreduce(Context& ctx, const CollectiveArgs& args);

// Shared buffers (Algorithm::shm_direct, shared_buffer.cc): each rank publishes its input once in its
// own buffer that every rank maps, then reads what it needs from the peers' in place. Only where
// Context::shared_capacity() holds payload_bytes(args); alltoallv is not served.
Status allreduce_shared(Context& ctx, const CollectiveArgs& args);
Status reduce_scatter_shared(Context& ctx, const CollectiveArgs& args);
Status allgather_shared(Context& ctx, const CollectiveArgs& args);  // and allgatherv
Status broadcast_shared(Context& ctx, const CollectiveArgs& args);
Status reduce_shared(Context& ctx, const CollectiveArgs& args);
Status gather_shared(Context& ctx, const CollectiveArgs& args);
Status scatter_shared(Context& ctx, const CollectiveArgs& args);
Status alltoall_shared(Context& ctx, const CollectiveArgs& args);
Status barrier_shared(Context& ctx, const CollectiveArgs& args);

}  // namespace weft::coll
