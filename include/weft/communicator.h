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
#include <vector>

#include "weft/export.h"
#include "weft/options.h"
#include "weft/status.h"
#include "weft/store.h"
#include "weft/types.h"
#include "weft/work.h"

namespace weft {

class CommunicatorImpl;

// What the ranks of Communicator::agree settled on.
struct Agreement {
  uint64_t flag = 0;        // bitwise AND of the flags the ranks in `alive` passed
  std::vector<int> alive;   // the ranks that took part, in rank order
  std::vector<int> failed;  // the others: seen dead or silent, or absent until the timeout
};

// The result of sparse_allreduce: some rows of a table of num_rows x row_width elements. It owns
// its memory; copies share it (so a binding can hand the arrays to its own objects uncopied).
struct SparseRows {
  size_t nnz = 0;                       // rows held
  std::shared_ptr<int64_t[]> indices;   // nnz distinct row indices, ascending
  std::shared_ptr<std::byte[]> values;  // nnz * row_width elements; row i is table row indices[i]
};

// The `peer` of a receive that accepts a message from any rank (as MPI_ANY_SOURCE).
inline constexpr int kAnySource = -1;

class WEFT_API Communicator {
 public:
  // Connects to every peer through `store`; blocks until all ranks have joined or
  // options.connect_timeout passes. options.rank and options.size must be set.
  static Result<std::unique_ptr<Communicator>> create(const Options& options,
                                                      std::shared_ptr<Store> store);
  // The same with the job key in `auth_key_file` (what WEFT_AUTH_KEY_FILE names): the links are
  // secured as options.security says (automatic: encrypted; docs/security.md). `store` should
  // authenticate with the same key (connect_tcp_store with auth_key_file). Empty: as above.
  static Result<std::unique_ptr<Communicator>> create(const Options& options,
                                                      std::shared_ptr<Store> store,
                                                      const std::string& auth_key_file);
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
  // form) tells which rank sent it. As in MPI, a message goes to the earliest-posted receive that
  // accepts it (a kAnySource receive posted before one naming the sender takes the sender's
  // message first), and a kAnySource receive takes, of the messages already waiting, the one
  // that arrived first.
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

  // Sparse allreduce of a table of num_rows x row_width elements (an embedding's gradient): this
  // rank holds `nnz` rows, row i (row_width elements at values + i * row_width) being table row
  // indices[i] (0 <= indices[i] < num_rows, in any order; repeated indices add up). Every rank
  // gets in *out the rows any rank holds, each the sum of every rank's, identical bit for bit on
  // every rank (each row summed in rank order, a rank's repeated rows in their order). Only
  // ReduceOp::sum. num_rows, row_width and dtype must agree across ranks; nnz may differ (0
  // too). Very sparse calls send every rank's rows to every rank, dense ones allreduce the
  // whole table (docs/algorithms.md); *out is written once the operation has succeeded.
  Status sparse_allreduce(const int64_t* indices, const void* values, size_t nnz,
                          size_t num_rows, size_t row_width, DataType dtype, ReduceOp op,
                          SparseRows* out);

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
  // indices, values and out must stay valid until the Work is done.
  WorkPtr sparse_allreduce_async(const int64_t* indices, const void* values, size_t nnz,
                                 size_t num_rows, size_t row_width, DataType dtype, ReduceOp op,
                                 SparseRows* out);

  // Splits into sub-communicators: ranks passing the same color form one, ordered by (key, rank).
  // A negative color returns a null communicator (the rank joins none). Collective over this one.
  Result<std::unique_ptr<Communicator>> split(int color, int key);

  // Ends every pending and future operation here with ErrorCode::aborted, and tells the peers,
  // whose pending operations end too. Returns in bounded time whatever the peers do.
  void abort(const std::string& reason = "abort() called");

  // --- fault tolerance (ULFM-style; see docs/fault-tolerance.md). A rank that dies, or from
  // which nothing arrives for Options::peer_timeout (stopped, frozen, cut off), is declared
  // failed: every operation with it ends with ErrorCode::peer_lost naming it, and the others
  // learn it from the first rank that saw it.

  // Invalidates the communicator on every rank: this rank's pending and later operations end
  // with ErrorCode::revoked, and so do the other ranks' (they are told through the transport).
  // Call it when one rank decides the group cannot go on; then shrink().
  void revoke();
  // Fault-tolerant agreement (as MPIX_Comm_agree): every rank still alive calls it, and all of
  // them return the same Agreement: the AND of their flags and who took part. Ranks seen dead or
  // silent are not waited for; a rank that has not called it within Options::timeout is left
  // out. Goes through the store, so it works on a broken communicator. A rank the others left
  // out gets ErrorCode::peer_lost.
  Result<Agreement> agree(uint64_t flag);
  // The survivors' communicator: revokes this one, agrees on who is alive, and connects those
  // ranks anew with dense ranks in the old order (rank 0 of the survivors is the lowest old
  // rank). Every surviving rank must call it; the data in the callers' buffers is untouched.
  Result<std::unique_ptr<Communicator>> shrink();
  // Adds `count` new ranks that call Communicator::join (or start with WEFT_JOIN=1 under
  // `weft run`): every rank of this (healthy) communicator calls it; they keep their ranks and
  // the joiners get ranks size()..size()+count-1 in the order they arrived. Waits up to
  // Options::connect_timeout for the joiners.
  Result<std::unique_ptr<Communicator>> grow(int count);
  // A new rank's side of grow(): waits (up to options.connect_timeout) until the members of the
  // job that uses `store` call grow(), then connects. options.rank and options.size are ignored.
  static Result<std::unique_ptr<Communicator>> join(const Options& options,
                                                    std::shared_ptr<Store> store);
  // How many ranks wait in join() for a grow() (read from the store; not collective, so ranks
  // that must agree on it should broadcast rank 0's answer).
  Result<int> pending_joins() const;

  // Waits for pending operations, then closes connections. Idempotent; the destructor calls it.
  Status shutdown();

  // This rank's most recent operations (Options::flight_recorder of them) as JSON: id, op,
  // describe ("allreduce #812 (f32 x 1024, sum)"), state (queued, running, done, failed), times
  // in seconds relative to now, error. The same record is written to Options::diag_dir when an
  // operation fails. See docs/diagnostics.md.
  std::string flight_record_json() const;

  // This communicator's counters in the Prometheus text format (version 0.0.4): collectives by op
  // and algorithm, bytes, a duration histogram, point-to-point posts, errors by code, lost peers.
  // The same series the process serves at Options::metrics_addr; only weft_build_info when
  // Options::metrics is off. Any thread. See docs/observability.md.
  std::string metrics() const;

 private:
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);
  static std::unique_ptr<Communicator> adopt(std::unique_ptr<CommunicatorImpl> impl);
  std::unique_ptr<CommunicatorImpl> impl_;
};

}  // namespace weft
