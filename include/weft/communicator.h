// Communicator: a group of ranks and every operation they can run together.
//
// Create one per process (or per thread, in tests) from Options plus a Store, or from the launcher
// environment with from_env(). All ranks of a group must call the same collectives in the same
// order with matching arguments; ranks that do not get ErrorCode::mismatch naming both calls.
//
// Buffers: (pointer, element count, DataType). Passing the same pointer as send and receive
// buffer runs the operation in place. Every operation exists in a blocking form returning Status
// and an *_async form returning a Work; blocking calls wait for earlier async ones, since
// operations of one communicator run in call order.
//
// Threads: a Communicator may be called from several threads, but the order of calls is the
// order of the collectives; callers that race must agree on that order themselves.
// Errors: a failed operation (timeout, lost peer, mismatch, abort) leaves the communicator broken:
// later operations fail at once with the same error. Destroying a communicator shuts it down.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "weft/export.h"
#include "weft/options.h"
#include "weft/status.h"
#include "weft/store.h"
#include "weft/types.h"
#include "weft/work.h"

namespace weft {

class CommunicatorImpl;

// The `peer` of a receive that accepts a message from any rank (as MPI_ANY_SOURCE).
inline constexpr int kAnySource = -1;

class WEFT_API Communicator {
 public:
  // Connects to every peer through `store`; blocks until all ranks have joined or
  // options.connect_timeout passes. options.rank and options.size must be set.
  static Result<std::unique_ptr<Communicator>> create(const Options& options,
                                                      std::shared_ptr<Store> store);
  // Reads rank, size and the rendezvous store from the launcher environment (weft run, torchrun,
  // Open MPI, Slurm; WEFT_* overrides), applies Options::from_env on top of `base`, and creates.
  static Result<std::unique_ptr<Communicator>> from_env(const Options& base);
  static Result<std::unique_ptr<Communicator>> from_env();

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const Options& options() const;

  // --- point-to-point: the receive names the sender (or kAnySource), the tag and the same byte
  // count. Messages from one sender with one tag arrive in send order. A receive from kAnySource
  // takes the first matching message from any rank; Work::source() (or *source of the blocking
  // form) tells which rank sent it.
  Status send(const void* buf, size_t bytes, int peer, uint32_t tag);
  Status recv(void* buf, size_t bytes, int peer, uint32_t tag, int* source = nullptr);
  WorkPtr send_async(const void* buf, size_t bytes, int peer, uint32_t tag);
  WorkPtr recv_async(void* buf, size_t bytes, int peer, uint32_t tag);

  // --- collectives. `count` is per rank for allgather/gather/scatter/reduce_scatter/alltoall
  // (the receive buffer holds size()*count elements for allgather, gather at the root, and the
  // send buffer size()*count for scatter at the root, reduce_scatter and alltoall).
  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  Status broadcast(void* buf, size_t count, DataType dtype, int root);
  Status reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root);
  Status allgather(const void* send, void* recv, size_t count, DataType dtype);
  // recv_counts[r] elements from rank r land at recv + displs[r] elements.
  Status allgatherv(const void* send, size_t send_count, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> displs,
                    DataType dtype);
  // Each rank receives `count` reduced elements: block `rank` of the size()*count send buffer.
  Status reduce_scatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  Status gather(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status scatter(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status alltoall(const void* send, void* recv, size_t count, DataType dtype);
  // Sends send_counts[r] elements from send + send_displs[r] to rank r; receives recv_counts[r]
  // elements from rank r at recv + recv_displs[r]. Counts must agree pairwise.
  Status alltoallv(const void* send, std::span<const size_t> send_counts,
                   std::span<const size_t> send_displs, void* recv,
                   std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                   DataType dtype);
  Status barrier();

  // Async forms: same arguments; span arguments are copied, buffers are not.
  WorkPtr allreduce_async(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  WorkPtr broadcast_async(void* buf, size_t count, DataType dtype, int root);
  WorkPtr reduce_async(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                       int root);
  WorkPtr allgather_async(const void* send, void* recv, size_t count, DataType dtype);
  WorkPtr allgatherv_async(const void* send, size_t send_count, void* recv,
                           std::span<const size_t> recv_counts, std::span<const size_t> displs,
                           DataType dtype);
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t count, DataType dtype,
                               ReduceOp op);
  WorkPtr gather_async(const void* send, void* recv, size_t count, DataType dtype, int root);
  WorkPtr scatter_async(const void* send, void* recv, size_t count, DataType dtype, int root);
  WorkPtr alltoall_async(const void* send, void* recv, size_t count, DataType dtype);
  WorkPtr alltoallv_async(const void* send, std::span<const size_t> send_counts,
                          std::span<const size_t> send_displs, void* recv,
                          std::span<const size_t> recv_counts,
                          std::span<const size_t> recv_displs, DataType dtype);
  WorkPtr barrier_async();

  // Splits into sub-communicators: ranks passing the same color form one, ordered by (key, rank).
  // A negative color returns a null communicator (the rank joins none). Collective over this one.
  Result<std::unique_ptr<Communicator>> split(int color, int key);

  // Ends every pending and future operation here with ErrorCode::aborted, and tells the peers,
  // whose pending operations end too. Returns in bounded time whatever the peers do.
  void abort(const std::string& reason = "abort() called");

  // Waits for pending operations, then closes connections. Idempotent; the destructor calls it.
  Status shutdown();

  // This rank's most recent operations (Options::flight_recorder of them) as JSON: id, op,
  // describe ("allreduce #812 (f32 x 1024, sum)"), state (queued, running, done, failed), times
  // in seconds relative to now, error. The same record is written to Options::diag_dir when an
  // operation fails. See docs/diagnostics.md.
  std::string flight_record_json() const;

 private:
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);
  std::unique_ptr<CommunicatorImpl> impl_;
};

}  // namespace weft
