// One C call per collective and point-to-point operation (weft_c.h). Each is written once: with
// a null `work` it runs the blocking form, else the async one and hands back a weftWork_t.
#include <cstring>
#include <span>

#include "capi.h"

using weft::DataType;
using weft::OpKind;
using weft::capi::fail;
using weft::capi::invalid;
using weft::capi::typed;

namespace {

// The checks every call starts with, and the two ways it ends.
class Call {
 public:
  Call(weftComm_t comm, OpKind kind, weftWork_t* work, bool async)
      : comm_(comm), kind_(kind), work_(work) {
    if (comm == nullptr) {
      result_ = invalid(-1, weft::to_string(kind), "comm is NULL");
    } else if (async && work == nullptr) {
      result_ = invalid(rank(), weft::to_string(kind), "work is NULL");
    } else if (work != nullptr) {
      *work = nullptr;
    }
  }
  bool ok() const { return result_ == weftSuccess; }
  weftResult_t result() const { return result_; }
  int rank() const { return comm_->comm->rank(); }
  int size() const { return comm_->comm->size(); }
  weft::Communicator& comm() const { return *comm_->comm; }
  bool async() const { return work_ != nullptr; }

  weftResult_t done(const weft::Status& status) const { return fail(status); }
  // An operation refused before it started (bad arguments, a broken communicator) fails here
  // rather than through the work.
  weftResult_t started(weft::WorkPtr w) const {
    if (w->test() && !w->status().ok()) return fail(w->status());
    *work_ = new weftWork{std::move(w), rank(), kind_};
    return weftSuccess;
  }
  // Arrays of size() entries, or the error recorded (nullopt).
  std::optional<std::span<const size_t>> per_rank(const size_t* array, const char* name) const {
    if (array == nullptr) {
      invalid(rank(), weft::to_string(kind_), std::string(name) + " is NULL");
      return std::nullopt;
    }
    return std::span<const size_t>(array, static_cast<size_t>(size()));
  }

 private:
  weftComm_t comm_;
  OpKind kind_;
  weftWork_t* work_;
  weftResult_t result_ = weftSuccess;
};

weftResult_t allreduce(const void* send, void* recv, size_t count, weftDataType_t datatype,
                       weftRedOp_t op, weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, OpKind::allreduce, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), OpKind::allreduce, datatype, op);
  if (!t) return weftInvalidArgument;
  if (c.async()) return c.started(c.comm().allreduce_async(send, recv, count, t->dtype, t->op));
  return c.done(c.comm().allreduce(send, recv, count, t->dtype, t->op));
}

weftResult_t broadcast(const void* send, void* recv, size_t count, weftDataType_t datatype,
                       int root, weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, OpKind::broadcast, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), OpKind::broadcast, datatype);
  if (!t) return weftInvalidArgument;
  // weft broadcasts in place: the root's data goes to its receive buffer first.
  if (c.rank() == root && send != recv && send != nullptr && recv != nullptr) {
    std::memmove(recv, send, count * weft::dtype_size(*t));
  }
  if (c.async()) return c.started(c.comm().broadcast_async(recv, count, *t, root));
  return c.done(c.comm().broadcast(recv, count, *t, root));
}

weftResult_t reduce(const void* send, void* recv, size_t count, weftDataType_t datatype,
                    weftRedOp_t op, int root, weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, OpKind::reduce, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), OpKind::reduce, datatype, op);
  if (!t) return weftInvalidArgument;
  if (c.async()) return c.started(c.comm().reduce_async(send, recv, count, t->dtype, t->op, root));
  return c.done(c.comm().reduce(send, recv, count, t->dtype, t->op, root));
}

// allgather, gather, scatter and alltoall: (send, recv, count, dtype[, root]).
weftResult_t blocks(OpKind kind, const void* send, void* recv, size_t count,
                    weftDataType_t datatype, int root, weftComm_t comm, weftWork_t* work,
                    bool async) {
  Call c(comm, kind, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), kind, datatype);
  if (!t) return weftInvalidArgument;
  weft::Communicator& w = c.comm();
  switch (kind) {
    case OpKind::allgather:
      if (c.async()) return c.started(w.allgather_async(send, recv, count, *t));
      return c.done(w.allgather(send, recv, count, *t));
    case OpKind::gather:
      if (c.async()) return c.started(w.gather_async(send, recv, count, *t, root));
      return c.done(w.gather(send, recv, count, *t, root));
    case OpKind::scatter:
      if (c.async()) return c.started(w.scatter_async(send, recv, count, *t, root));
      return c.done(w.scatter(send, recv, count, *t, root));
    case OpKind::alltoall:
      if (c.async()) return c.started(w.alltoall_async(send, recv, count, *t));
      return c.done(w.alltoall(send, recv, count, *t));
    default: return invalid(c.rank(), weft::to_string(kind), "not a block collective");
  }
}

weftResult_t allgatherv(const void* send, size_t send_count, void* recv, const size_t* counts,
                        const size_t* displs, weftDataType_t datatype, weftComm_t comm,
                        weftWork_t* work, bool async) {
  Call c(comm, OpKind::allgatherv, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), OpKind::allgatherv, datatype);
  auto n = c.per_rank(counts, "recvcounts");
  auto d = c.per_rank(displs, "displs");
  if (!t || !n || !d) return weftInvalidArgument;
  if (c.async()) return c.started(c.comm().allgatherv_async(send, send_count, recv, *n, *d, *t));
  return c.done(c.comm().allgatherv(send, send_count, recv, *n, *d, *t));
}

weftResult_t reduce_scatter(const void* send, void* recv, size_t count, weftDataType_t datatype,
                            weftRedOp_t op, weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, OpKind::reduce_scatter, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), OpKind::reduce_scatter, datatype, op);
  if (!t) return weftInvalidArgument;
  if (c.async()) {
    return c.started(c.comm().reduce_scatter_async(send, recv, count, t->dtype, t->op));
  }
  return c.done(c.comm().reduce_scatter(send, recv, count, t->dtype, t->op));
}

weftResult_t alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs,
                       void* recv, const size_t* recv_counts, const size_t* recv_displs,
                       weftDataType_t datatype, weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, OpKind::alltoallv, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), OpKind::alltoallv, datatype);
  auto sn = c.per_rank(send_counts, "sendcounts");
  auto sd = c.per_rank(send_displs, "sdispls");
  auto rn = c.per_rank(recv_counts, "recvcounts");
  auto rd = c.per_rank(recv_displs, "rdispls");
  if (!t || !sn || !sd || !rn || !rd) return weftInvalidArgument;
  if (c.async()) return c.started(c.comm().alltoallv_async(send, *sn, *sd, recv, *rn, *rd, *t));
  return c.done(c.comm().alltoallv(send, *sn, *sd, recv, *rn, *rd, *t));
}

weftResult_t barrier(weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, OpKind::barrier, work, async);
  if (!c.ok()) return c.result();
  if (c.async()) return c.started(c.comm().barrier_async());
  return c.done(c.comm().barrier());
}

// Point to point with tag 0, as NCCL has no tags.
weftResult_t p2p(OpKind kind, void* buf, size_t count, weftDataType_t datatype, int peer,
                 weftComm_t comm, weftWork_t* work, bool async) {
  Call c(comm, kind, work, async);
  if (!c.ok()) return c.result();
  auto t = typed(c.rank(), kind, datatype);
  if (!t) return weftInvalidArgument;
  const size_t bytes = count * weft::dtype_size(*t);
  weft::Communicator& w = c.comm();
  if (kind == OpKind::send) {
    if (c.async()) return c.started(w.send_async(buf, bytes, peer, 0));
    return c.done(w.send(buf, bytes, peer, 0));
  }
  if (c.async()) return c.started(w.recv_async(buf, bytes, peer, 0));
  return c.done(w.recv(buf, bytes, peer, 0));
}

constexpr int kNoRoot = 0;  // block collectives without a root ignore it

}  // namespace

extern "C" {

weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, weftRedOp_t op, weftComm_t comm) {
  return allreduce(sendbuff, recvbuff, count, datatype, op, comm, nullptr, false);
}
weftResult_t weftAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                weftWork_t* work) {
  return allreduce(sendbuff, recvbuff, count, datatype, op, comm, work, true);
}

weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, int root, weftComm_t comm) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, nullptr, false);
}
weftResult_t weftBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count,
                                weftDataType_t datatype, int root, weftComm_t comm,
                                weftWork_t* work) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, work, true);
}

weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count,
                        weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, nullptr, false);
}
weftResult_t weftReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                             weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm,
                             weftWork_t* work) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, work, true);
}

weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           weftDataType_t datatype, weftComm_t comm) {
  return blocks(OpKind::allgather, sendbuff, recvbuff, sendcount, datatype, kNoRoot, comm,
                nullptr, false);
}
weftResult_t weftAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount,
                                weftDataType_t datatype, weftComm_t comm, weftWork_t* work) {
  return blocks(OpKind::allgather, sendbuff, recvbuff, sendcount, datatype, kNoRoot, comm, work,
                true);
}

weftResult_t weftAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                            const size_t* recvcounts, const size_t* displs,
                            weftDataType_t datatype, weftComm_t comm) {
  return allgatherv(sendbuff, sendcount, recvbuff, recvcounts, displs, datatype, comm, nullptr,
                    false);
}
weftResult_t weftAllGatherVAsync(const void* sendbuff, size_t sendcount, void* recvbuff,
                                 const size_t* recvcounts, const size_t* displs,
                                 weftDataType_t datatype, weftComm_t comm, weftWork_t* work) {
  return allgatherv(sendbuff, sendcount, recvbuff, recvcounts, displs, datatype, comm, work,
                    true);
}

weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               weftDataType_t datatype, weftRedOp_t op, weftComm_t comm) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, nullptr, false);
}
weftResult_t weftReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount,
                                    weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                    weftWork_t* work) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, work, true);
}

weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                        weftDataType_t datatype, int root, weftComm_t comm) {
  return blocks(OpKind::gather, sendbuff, recvbuff, sendcount, datatype, root, comm, nullptr,
                false);
}
weftResult_t weftGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount,
                             weftDataType_t datatype, int root, weftComm_t comm,
                             weftWork_t* work) {
  return blocks(OpKind::gather, sendbuff, recvbuff, sendcount, datatype, root, comm, work, true);
}

weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                         weftDataType_t datatype, int root, weftComm_t comm) {
  return blocks(OpKind::scatter, sendbuff, recvbuff, recvcount, datatype, root, comm, nullptr,
                false);
}
weftResult_t weftScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount,
                              weftDataType_t datatype, int root, weftComm_t comm,
                              weftWork_t* work) {
  return blocks(OpKind::scatter, sendbuff, recvbuff, recvcount, datatype, root, comm, work, true);
}

weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          weftDataType_t datatype, weftComm_t comm) {
  return blocks(OpKind::alltoall, sendbuff, recvbuff, count, datatype, kNoRoot, comm, nullptr,
                false);
}
weftResult_t weftAllToAllAsync(const void* sendbuff, void* recvbuff, size_t count,
                               weftDataType_t datatype, weftComm_t comm, weftWork_t* work) {
  return blocks(OpKind::alltoall, sendbuff, recvbuff, count, datatype, kNoRoot, comm, work, true);
}

weftResult_t weftAllToAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                           void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                           weftDataType_t datatype, weftComm_t comm) {
  return alltoallv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm,
                   nullptr, false);
}
weftResult_t weftAllToAllVAsync(const void* sendbuff, const size_t* sendcounts,
                                const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                                const size_t* rdispls, weftDataType_t datatype, weftComm_t comm,
                                weftWork_t* work) {
  return alltoallv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm,
                   work, true);
}

weftResult_t weftBarrier(weftComm_t comm) { return barrier(comm, nullptr, false); }
weftResult_t weftBarrierAsync(weftComm_t comm, weftWork_t* work) {
  return barrier(comm, work, true);
}

weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm) {
  return p2p(OpKind::send, const_cast<void*>(sendbuff), count, datatype, peer, comm, nullptr,
             false);
}
weftResult_t weftSendAsync(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                           weftComm_t comm, weftWork_t* work) {
  return p2p(OpKind::send, const_cast<void*>(sendbuff), count, datatype, peer, comm, work, true);
}

weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm) {
  return p2p(OpKind::recv, recvbuff, count, datatype, peer, comm, nullptr, false);
}
weftResult_t weftRecvAsync(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                           weftComm_t comm, weftWork_t* work) {
  return p2p(OpKind::recv, recvbuff, count, datatype, peer, comm, work, true);
}

}  // extern "C"
