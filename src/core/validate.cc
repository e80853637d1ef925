#include "core/validate.h"

#include <fmt/format.h>

#include "weft/communicator.h"

#include <limits>

namespace weft {
namespace {

Status bad(int rank, OpKind kind, const std::string& what) {
  return Status(ErrorCode::invalid_argument, fmt::format("rank {}: {}: {}", rank, to_string(kind), what));
}

bool fits(size_t count, size_t esize) {
  return esize == 0 || count <= std::numeric_limits<size_t>::max() / esize;
}

Status validate_sparse(const CollectiveArgs& a, int rank) {
  const OpKind k = a.kind;
  if (a.op != ReduceOp::sum) {
    return bad(rank, k, fmt::format("only sum is supported, not {}", to_string(a.op)));
  }
  const size_t es = dtype_size(a.dtype);
  if (a.num_rows > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ||
      !fits(a.num_rows, a.row_width) || !fits(a.num_rows * a.row_width, es)) {
    return bad(rank, k, fmt::format("a table of {} x {} elements overflows the address space",
                                    a.num_rows, a.row_width));
  }
  if (!fits(a.count, a.row_width) || !fits(a.count * a.row_width, es) ||
      !fits(a.count, sizeof(int64_t))) {
    return bad(rank, k, fmt::format("{} rows overflow the address space", a.count));
  }
  if (a.sparse_out == nullptr) return bad(rank, k, "the result pointer is null");
  if (a.count > 0 && a.indices == nullptr) {
    return bad(rank, k, fmt::format("indices are null with {} rows", a.count));
  }
  if (a.count > 0 && a.row_width > 0 && a.send == nullptr) {
    return bad(rank, k, fmt::format("values are null with {} rows", a.count));
  }
  for (size_t i = 0; i < a.count; ++i) {
    const int64_t row = a.indices[i];
    if (row < 0 || static_cast<uint64_t>(row) >= a.num_rows) {
      return bad(rank, k, fmt::format("indices[{}] = {} is outside the table's {} rows", i, row,
                                      a.num_rows));
    }
  }
  return Status();
}

}  // namespace

Status validate_collective(const CollectiveArgs& a, int rank, int size) {
  const size_t n = static_cast<size_t>(size);
  const size_t es = dtype_size(a.dtype);
  if (es == 0) return bad(rank, a.kind, "unknown dtype");
  if (static_cast<int>(a.op) >= kReduceOpCount) return bad(rank, a.kind, "unknown reduce op");
  bool reducing = a.kind == OpKind::allreduce || a.kind == OpKind::reduce ||
                  a.kind == OpKind::reduce_scatter;
  if (reducing && is_bitwise(a.op) && !is_integer(a.dtype)) {
    return bad(rank, a.kind, fmt::format("{} is defined for integer types only, not {}",
                                         to_string(a.op), to_string(a.dtype)));
  }
  bool rooted = a.kind == OpKind::broadcast || a.kind == OpKind::reduce ||
                a.kind == OpKind::gather || a.kind == OpKind::scatter;
  if (rooted && (a.root < 0 || a.root >= size)) {
    return bad(rank, a.kind, fmt::format("root {} is out of range (size {})", a.root, size));
  }
  if (!fits(a.count, es * n)) return bad(rank, a.kind, "count overflows the address space");
  auto need = [&](const void* p, size_t elems, const char* which) -> Status {
    if (elems > 0 && p == nullptr) {
      return bad(rank, a.kind, fmt::format("{} buffer is null with {} elements", which, elems));
    }
    return Status();
  };
  bool is_root = a.root == rank;
  switch (a.kind) {
    case OpKind::allreduce:
      WEFT_RETURN_IF_ERROR(need(a.send, a.count, "send"));
      return need(a.recv, a.count, "receive");
    case OpKind::broadcast:
      return need(a.recv, a.count, "the");
    case OpKind::reduce:
      WEFT_RETURN_IF_ERROR(need(a.send, a.count, "send"));
      return is_root ? need(a.recv, a.count, "receive") : Status();
    case OpKind::allgather:
      WEFT_RETURN_IF_ERROR(need(a.send, a.count, "send"));
      return need(a.recv, a.count * n, "receive");
    case OpKind::reduce_scatter:
      WEFT_RETURN_IF_ERROR(need(a.send, a.count * n, "send"));
      return need(a.recv, a.count, "receive");
    case OpKind::gather:
      WEFT_RETURN_IF_ERROR(need(a.send, a.count, "send"));
      return is_root ? need(a.recv, a.count * n, "receive") : Status();
    case OpKind::scatter:
      WEFT_RETURN_IF_ERROR(need(a.recv, a.count, "receive"));
      return is_root ? need(a.send, a.count * n, "send") : Status();
    case OpKind::alltoall:
      WEFT_RETURN_IF_ERROR(need(a.send, a.count * n, "send"));
      return need(a.recv, a.count * n, "receive");
    case OpKind::allgatherv: {
      if (a.recv_counts.size() != n || a.recv_displs.size() != n) {
        return bad(rank, a.kind, fmt::format("recv_counts and displs must have {} entries (have {} "
                                             "and {})", n, a.recv_counts.size(), a.recv_displs.size()));
      }
      if (a.count != a.recv_counts[rank]) {
        return bad(rank, a.kind, fmt::format("send count {} differs from recv_counts[{}] = {}",
                                             a.count, rank, a.recv_counts[rank]));
      }
      size_t total = 0;
      for (size_t r = 0; r < n; ++r) {
        if (!fits(a.recv_counts[r], es)) return bad(rank, a.kind, "count overflows");
        total = std::max(total, a.recv_displs[r] + a.recv_counts[r]);
      }
      WEFT_RETURN_IF_ERROR(need(a.send, a.count, "send"));
      return need(a.recv, total, "receive");
    }
    case OpKind::alltoallv: {
      if (a.send_counts.size() != n || a.send_displs.size() != n || a.recv_counts.size() != n ||
          a.recv_displs.size() != n) {
        return bad(rank, a.kind, fmt::format("send/recv counts and displacements must have {} "
                                             "entries each", n));
      }
      size_t stotal = 0, rtotal = 0;
      for (size_t r = 0; r < n; ++r) {
        stotal = std::max(stotal, a.send_displs[r] + a.send_counts[r]);
        rtotal = std::max(rtotal, a.recv_displs[r] + a.recv_counts[r]);
      }
      WEFT_RETURN_IF_ERROR(need(a.send, stotal, "send"));
      return need(a.recv, rtotal, "receive");
    }
    case OpKind::sparse_allreduce:
      return validate_sparse(a, rank);
    case OpKind::barrier:
      return Status();
    case OpKind::send:
    case OpKind::recv:
      break;
  }
  return bad(rank, a.kind, "not a collective");
}

Status validate_p2p(OpKind kind, const void* buf, size_t bytes, int peer, int rank, int size) {
  if ((peer < 0 || peer >= size) && !(kind == OpKind::recv && peer == kAnySource)) {
    return bad(rank, kind, fmt::format("peer {} is out of range (size {})", peer, size));
  }
  if (bytes > 0 && buf == nullptr) {
    return bad(rank, kind, fmt::format("buffer is null with {} bytes", bytes));
  }
  return Status();
}

}  // namespace weft
