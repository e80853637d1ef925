// One collective as `weft bench` measures it: how a byte size maps to element counts, which
// buffers it reads and writes, its bus-bandwidth factor (as nccl-tests defines it), and the call.
//
// Sizes follow nccl-tests: `bytes` is the size of the larger buffer of one rank (the whole
// gathered / scattered / exchanged buffer for allgather, reduce_scatter, gather, scatter and
// alltoall, where the per-rank count is bytes / element size / world size).
// In place follows weft's (and NCCL's) convention: send == recv for allreduce, reduce, broadcast
// and alltoall; send == recv + rank * count for allgather; recv == send + rank * count for
// reduce_scatter; at the root only for gather (send == recv + root * count) and scatter (recv ==
// send + root * count). Broadcast only exists in place; barrier has no buffers.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "weft/communicator.h"

namespace weft::bench {

struct BenchParams {
  DataType dtype = DataType::fp32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool async = false;  // the *_async call, then wait()
};

struct CaseShape {
  size_t count = 0;        // per-rank element count passed to the call
  size_t total_count = 0;  // elements in the larger buffer (printed as "count")
  size_t bytes = 0;        // total_count * element size (printed as "size")
};

// The collectives `weft bench all` runs, in order.
std::span<const OpKind> benchmarked_kinds();

bool uses_reduce_op(OpKind kind);
bool uses_root(OpKind kind);
bool has_out_of_place(OpKind kind);
bool has_in_place(OpKind kind);
// busbw = algbw * factor: 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter,
// alltoall, gather and scatter, 1 for broadcast and reduce.
double bus_factor(OpKind kind, int world_size);
// The shape for a requested byte size; per-rank counts below one element are raised to one.
CaseShape shape_for(OpKind kind, size_t requested_bytes, DataType dtype, int world_size);

// The pointers one call gets, carved out of two buffers of at least shape.bytes each (only the
// second one when in place). The result always lands at `recv`.
struct CallBuffers {
  void* send = nullptr;
  void* recv = nullptr;
};
CallBuffers place_buffers(OpKind kind, const CaseShape& shape, const BenchParams& params, int rank,
                          void* send_buffer, void* recv_buffer, bool in_place);

Status run_collective(Communicator& comm, OpKind kind, const CaseShape& shape,
                      const BenchParams& params, const CallBuffers& buffers);

}  // namespace weft::bench
