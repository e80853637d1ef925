// Context: everything a collective algorithm sees of the world for one operation.
//
// An algorithm is a plain function `Status algo(Context&, const CollectiveArgs&)` that runs on the
// communicator's executing thread. It posts sends and receives to peers by rank, waits for them,
// reduces with the kernels in reduce/, and returns. It never names a transport.
//
// Slots: every message of one operation carries the operation's sequence number plus a `slot`
// chosen by the algorithm (e.g. the step number). Messages between the same pair of ranks with
// the same slot match in posting order, so reusing one slot for a stream of chunks is fine.
//
// Waiting respects the operation deadline (Options::timeout from the start of the operation); a
// wait that passes it returns ErrorCode::timeout naming the rank waited for. On any error the
// algorithm just returns it; the Context cancels what is still posted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "runtime/completion.h"
#include "transport/transport.h"
#include "weft/options.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft {

class BufferPool;
struct SparseRows;  // weft/communicator.h

// The arguments of one collective call, as validated by the communicator.
struct CollectiveArgs {
  OpKind kind = OpKind::allreduce;
  DataType dtype = DataType::fp32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  const void* send = nullptr;  // == recv for in-place
  void* recv = nullptr;
  size_t count = 0;  // elements (per rank where the collective says so; see communicator.h)
  // allgatherv: recv_counts/recv_displs; send_count is `count`.
  // alltoallv: all four.
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  // sparse_allreduce: `count` rows of row_width elements at `send`, row i being table row
  // indices[i] (< num_rows); the result goes to *sparse_out.
  const int64_t* indices = nullptr;
  size_t num_rows = 0;
  size_t row_width = 0;
  SparseRows* sparse_out = nullptr;

  size_t elem_size() const { return dtype_size(dtype); }
  bool in_place() const { return send == recv; }

  // The fields every collective has; the rest stay empty.
  static CollectiveArgs of(OpKind kind, const void* send, void* recv, size_t count, DataType dtype,
                           ReduceOp op = ReduceOp::sum, int root = 0) {
    CollectiveArgs a;
    a.kind = kind;
    a.send = send;
    a.recv = recv;
    a.count = count;
    a.dtype = dtype;
    a.op = op;
    a.root = root;
    return a;
  }
};

// A posted message; returned by Context::isend/irecv, passed to wait().
using Handle = Request*;

class Context {
 public:
  using Clock = weft::Clock;

  Context(Transport& transport, const Options& options, const Fingerprint& fp,
          BufferPool& pool);
  // `start`: when the operation started (its timeout counts from there), if the caller has it.
  Context(Transport& transport, const Options& options, const Fingerprint& fp, BufferPool& pool,
          Clock::time_point start);
  ~Context();  // fails the transport if requests are still pending (an algorithm bug or error)
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  const Options& options() const { return options_; }
  const Fingerprint& fingerprint() const { return fp_; }

  // Posts a message. `buf` must stay valid until the handle is waited for.
  Handle isend(int peer, uint32_t slot, const void* buf, size_t bytes);
  Handle irecv(int peer, uint32_t slot, void* buf, size_t bytes);
  // Waits for one / all handles; the handles are released and must not be used again.
  Status wait(Handle h);
  Status wait_all(std::span<const Handle> hs);
  // Blocking conveniences.
  Status send(int peer, uint32_t slot, const void* buf, size_t bytes);
  Status recv(int peer, uint32_t slot, void* buf, size_t bytes);
  // Sends to `to` and receives from `from` concurrently.
  Status sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes,
                  uint32_t slot);

  // Shared buffers (Algorithm::shm_direct; the contract is Transport's shared_*). Errors are
  // remembered like a failed wait's, and a timeout names the operation and the rank waited for.
  size_t shared_capacity() const { return transport_.shared_capacity(); }
  Result<uint8_t*> shared_begin();
  void shared_publish(size_t bytes) { transport_.shared_publish(bytes); }
  Result<std::span<const uint8_t>> shared_read(int peer);

  // Scratch memory from the communicator's pool, reused across operations; valid until this
  // Context ends. Not zeroed; nullptr for 0 bytes. When memory is exhausted: the error (naming
  // the rank, the operation and the size), remembered like a failed wait's.
  Result<std::byte*> scratch(size_t bytes);

  Clock::time_point deadline() const { return deadline_; }

  // Added to every slot posted from now on. A collective that runs others as its steps
  // (sparse_allreduce) gives each step its own range, so that a step's messages can never be
  // taken for another's, whatever slots the step's algorithm numbers from 0.
  void set_slot_offset(uint32_t offset) { slot_offset_ = offset; }

 private:
  Request* acquire();
  void release(Request* r);
  Status finish(Request* r);  // takes a done request's status and releases it
  Status timeout_error(const Request& r) const;
  Status timeout_error(std::string_view waiting) const;  // "...Timed out after 30 s <waiting>"
  Status remember(Status st);  // shared_*: keeps the first error, completes a timeout's text

  Transport& transport_;
  const Options& options_;
  Fingerprint fp_;
  BufferPool& pool_;
  Completion completion_;
  Clock::time_point start_;
  Clock::time_point deadline_;
  // Stable addresses; made on the first post (libstdc++'s deque allocates when constructed, and
  // operations through shared buffers post nothing).
  std::optional<std::deque<Request>> requests_;
  std::vector<Request*> free_;
  size_t outstanding_ = 0;  // posted, not yet waited for
  uint32_t slot_offset_ = 0;
  Status error_;            // the first error a wait returned; fails the transport at the end
  std::vector<std::pair<void*, size_t>> scratch_;  // returned to pool_ at the end
};

}  // namespace weft
