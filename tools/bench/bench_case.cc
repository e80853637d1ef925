#include "tools/bench/bench_case.h"

#include <algorithm>
#include <array>

namespace weft::bench {

std::span<const OpKind> benchmarked_kinds() {
  static constexpr std::array kKinds = {OpKind::allreduce, OpKind::broadcast,      OpKind::reduce,
                                        OpKind::allgather, OpKind::reduce_scatter, OpKind::gather,
                                        OpKind::scatter,   OpKind::alltoall,       OpKind::barrier};
  return kKinds;
}

bool uses_reduce_op(OpKind kind) {
  return kind == OpKind::allreduce || kind == OpKind::reduce || kind == OpKind::reduce_scatter;
}

bool uses_root(OpKind kind) {
  return kind == OpKind::broadcast || kind == OpKind::reduce || kind == OpKind::gather ||
         kind == OpKind::scatter;
}

bool has_out_of_place(OpKind kind) { return kind != OpKind::broadcast; }

bool has_in_place(OpKind kind) { return kind != OpKind::barrier; }

double bus_factor(OpKind kind, int world_size) {
  double n = world_size;
  switch (kind) {
    case OpKind::allreduce:
      return 2.0 * (n - 1) / n;
    case OpKind::broadcast:
    case OpKind::reduce:
      return 1.0;
    default:
      return (n - 1) / n;
  }
}

CaseShape shape_for(OpKind kind, size_t requested_bytes, DataType dtype, int world_size) {
  const size_t es = dtype_size(dtype);
  const size_t n = static_cast<size_t>(world_size);
  CaseShape s;
  switch (kind) {
    case OpKind::barrier:
      return s;
    case OpKind::allreduce:
    case OpKind::broadcast:
    case OpKind::reduce:
      s.count = std::max<size_t>(1, requested_bytes / es);
      s.total_count = s.count;
      break;
    default:  // the larger buffer holds one block per rank
      s.count = std::max<size_t>(1, requested_bytes / es / n);
      s.total_count = s.count * n;
      break;
  }
  s.bytes = s.total_count * es;
  return s;
}

CallBuffers place_buffers(OpKind kind, const CaseShape& shape, const BenchParams& p, int rank,
                          void* send_buffer, void* recv_buffer, bool in_place) {
  if (!in_place) return {send_buffer, recv_buffer};
  auto* base = static_cast<char*>(recv_buffer);
  auto block = [&](int r) {
    return base + static_cast<size_t>(r) * shape.count * dtype_size(p.dtype);
  };
  switch (kind) {
    case OpKind::allgather:
      return {block(rank), base};
    case OpKind::reduce_scatter:
      return {base, block(rank)};
    case OpKind::gather:
      return rank == p.root ? CallBuffers{block(rank), base}
                            : CallBuffers{send_buffer, recv_buffer};
    case OpKind::scatter:
      return rank == p.root ? CallBuffers{base, block(rank)}
                            : CallBuffers{send_buffer, recv_buffer};
    default:
      return {base, base};
  }
}

namespace {

WorkPtr start_collective(Communicator& comm, OpKind kind, const CaseShape& shape,
                         const BenchParams& p, const CallBuffers& b) {
  const size_t c = shape.count;
  switch (kind) {
    case OpKind::allreduce:
      return comm.allreduce_async(b.send, b.recv, c, p.dtype, p.op);
    case OpKind::broadcast:
      return comm.broadcast_async(b.recv, c, p.dtype, p.root);
    case OpKind::reduce:
      return comm.reduce_async(b.send, b.recv, c, p.dtype, p.op, p.root);
    case OpKind::allgather:
      return comm.allgather_async(b.send, b.recv, c, p.dtype);
    case OpKind::reduce_scatter:
      return comm.reduce_scatter_async(b.send, b.recv, c, p.dtype, p.op);
    case OpKind::gather:
      return comm.gather_async(b.send, b.recv, c, p.dtype, p.root);
    case OpKind::scatter:
      return comm.scatter_async(b.send, b.recv, c, p.dtype, p.root);
    case OpKind::alltoall:
      return comm.alltoall_async(b.send, b.recv, c, p.dtype);
    case OpKind::barrier:
      return comm.barrier_async();
    default:
      return nullptr;
  }
}

}  // namespace

Status run_collective(Communicator& comm, OpKind kind, const CaseShape& shape, const BenchParams& p,
                      const CallBuffers& b) {
  if (p.async) {
    WorkPtr w = start_collective(comm, kind, shape, p, b);
    if (w) return w->wait();
  }
  const size_t c = shape.count;
  switch (kind) {
    case OpKind::allreduce:
      return comm.allreduce(b.send, b.recv, c, p.dtype, p.op);
    case OpKind::broadcast:
      return comm.broadcast(b.recv, c, p.dtype, p.root);
    case OpKind::reduce:
      return comm.reduce(b.send, b.recv, c, p.dtype, p.op, p.root);
    case OpKind::allgather:
      return comm.allgather(b.send, b.recv, c, p.dtype);
    case OpKind::reduce_scatter:
      return comm.reduce_scatter(b.send, b.recv, c, p.dtype, p.op);
    case OpKind::gather:
      return comm.gather(b.send, b.recv, c, p.dtype, p.root);
    case OpKind::scatter:
      return comm.scatter(b.send, b.recv, c, p.dtype, p.root);
    case OpKind::alltoall:
      return comm.alltoall(b.send, b.recv, c, p.dtype);
    case OpKind::barrier:
      return comm.barrier();
    default:
      return Status(ErrorCode::invalid_argument,
                    std::string("weft bench does not measure ") + to_string(kind));
  }
}

}  // namespace weft::bench
