// Collectives through shared buffers (Algorithm::shm_direct: the option keeps its user-facing
// name; everywhere inside, the concept is "shared buffers").
//
// Every rank copies its whole input into its own shared buffer once (shared_begin, copy,
// shared_publish), then reads what it needs from every rank's buffer in place: one write and one
// wait per peer, no message, no matching, no intermediate hop. Outputs are written only from the
// buffers, so any aliasing of send and receive (in place) behaves as if the input were read first.
// Reductions combine the buffers in rank order, so every rank computing the same element gets the
// same bits. The transport keeps a rank's buffer unchanged until every peer has finished reading
// it (Transport::shared_begin), and a peer that publishes a different collective is a mismatch.
#include <fmt/format.h>

#include <array>
#include <span>
#include <vector>

#include "collective/algorithms.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

// Publishes `bytes` of `src` as this rank's contribution.
Status publish(Context& ctx, const void* src, size_t bytes) {
  if (bytes > ctx.shared_capacity()) {
    return Status(
        ErrorCode::internal,
        fmt::format("rank {}: {}: {} bytes do not fit the shared buffer ({} bytes)", ctx.rank(),
                    ctx.fingerprint().describe(), bytes, ctx.shared_capacity()));
  }
  auto buf = ctx.shared_begin();
  if (!buf.ok()) return buf.status();
  copy_bytes(buf.value(), src, bytes);
  ctx.shared_publish(bytes);
  return Status::success();
}

// `peer`'s contribution, which must hold at least `need` bytes (a shorter one means the ranks
// disagree on the sizes, e.g. allgatherv counts).
Result<const std::byte*> contribution(Context& ctx, int peer, size_t need) {
  auto data = ctx.shared_read(peer);
  if (!data.ok()) return data.status();
  if (data->size() < need) {
    return Status(ErrorCode::mismatch,
                  fmt::format("rank {}: {}: rank {} published {} bytes where {} were expected "
                              "(the ranks disagree on the counts)",
                              ctx.rank(), ctx.fingerprint().describe(), peer, data->size(), need));
  }
  return reinterpret_cast<const std::byte*>(data->data());
}

// Every rank's contribution in rank order, each at least `need` bytes long, advanced by
// `offset` bytes. Up to 16 ranks without touching the heap (the 8-byte allreduce path).
class Contributions {
 public:
  // `own`, when not null, is this rank's part (see own_input) and its shared buffer is not read.
  Status read(Context& ctx, size_t need, size_t offset, const std::byte* own = nullptr) {
    const auto n = static_cast<size_t>(ctx.size());
    if (n > inline_.size()) heap_.resize(n);
    ptrs_ = n > inline_.size() ? std::span<const std::byte*>(heap_)
                               : std::span<const std::byte*>(inline_.data(), n);
    // Peers after this rank first: with ranks sharing cores, the next rank tends to publish first.
    for (size_t i = 0; i < n; ++i) {
      const int p = mod(ctx.rank() + 1 + static_cast<long>(i), ctx.size());
      if (p == ctx.rank() && own != nullptr) {
        ptrs_[static_cast<size_t>(p)] = own;
        continue;
      }
      auto c = contribution(ctx, p, need);
      if (!c.ok()) return c.status();
      ptrs_[static_cast<size_t>(p)] = c.value() + offset;
    }
    return Status::success();
  }
  // This rank's part from its input `own` rather than its shared buffer, or null where the
  // reduction does not allow it. The buffer's line was just written and the peers are reading
  // it, so loading it back can stall until the writes leave the store buffer. `own` may be the
  // output (`out`, `bytes` long) only if it is one of the first two sources (reduce_in_order),
  // and must not overlap it partly.
  static const std::byte* own_input(int rank, const std::byte* own, const void* out,
                                    size_t bytes) {
    const auto* o = static_cast<const std::byte*>(out);
    const bool overlap = own < o + bytes && o < own + bytes;
    return !overlap || (own == o && rank < 2) ? own : nullptr;
  }
  std::span<const std::byte* const> get() const { return ptrs_; }
  const std::byte* operator[](size_t rank) const { return ptrs_[rank]; }

 private:
  std::array<const std::byte*, 16> inline_;  // not cleared: read() writes what get() shows
  std::vector<const std::byte*> heap_;
  std::span<const std::byte*> ptrs_;
};

// dst = the contributions combined in rank order, finished for avg.
void reduce_all(void* dst, const Contributions& srcs, size_t count, const CollectiveArgs& args,
                int n) {
  reduce_in_order(dst, srcs.get(), count, args);
  finish_avg(dst, count, args, n);
}

}  // namespace

Status allreduce_shared(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, bytes));
  Contributions srcs;
  WEFT_RETURN_IF_ERROR(srcs.read(
      ctx, bytes, 0,
      Contributions::own_input(ctx.rank(), static_cast<const std::byte*>(args.send), args.recv,
                               bytes)));
  reduce_all(args.recv, srcs, args.count, args, ctx.size());
  return Status::success();
}

Status reduce_scatter_shared(Context& ctx, const CollectiveArgs& args) {
  const size_t total = static_cast<size_t>(ctx.size()) * args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, total));
  Contributions srcs;
  const size_t own = static_cast<size_t>(ctx.rank()) * args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(srcs.read(
      ctx, total, own,
      Contributions::own_input(ctx.rank(), static_cast<const std::byte*>(args.send) + own,
                               args.recv, args.count * args.elem_size())));
  reduce_all(args.recv, srcs, args.count, args, ctx.size());
  return Status::success();
}

Status allgather_shared(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  const size_t es = args.elem_size();
  const BlockLayout blocks = args.kind == OpKind::allgatherv
                                 ? BlockLayout::from(args.recv_counts, args.recv_displs)
                                 : BlockLayout::uniform(args.count, n);
  const size_t own = blocks.size[static_cast<size_t>(ctx.rank())] * es;
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, own));
  for (int i = 0; i < n; ++i) {
    const auto p = static_cast<size_t>(mod(ctx.rank() + 1 + i, n));
    const size_t bytes = blocks.size[p] * es;
    auto src = contribution(ctx, static_cast<int>(p), bytes);
    if (!src.ok()) return src.status();
    copy_bytes(at(args.recv, blocks.offset[p], es), src.value(), bytes);
  }
  return Status::success();
}

Status broadcast_shared(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  const bool root = ctx.rank() == args.root;
  // Every rank publishes (non-roots nothing): that is how the root learns its buffer was read.
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, root ? bytes : 0));
  auto src = contribution(ctx, args.root, bytes);
  if (!src.ok()) return src.status();
  copy_bytes(args.recv, src.value(), bytes);
  return Status::success();
}

Status reduce_shared(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, bytes));
  if (ctx.rank() != args.root) return Status::success();
  Contributions srcs;
  WEFT_RETURN_IF_ERROR(srcs.read(
      ctx, bytes, 0,
      Contributions::own_input(ctx.rank(), static_cast<const std::byte*>(args.send), args.recv,
                               bytes)));
  reduce_all(args.recv, srcs, args.count, args, ctx.size());
  return Status::success();
}

Status gather_shared(Context& ctx, const CollectiveArgs& args) {
  const size_t block = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, block));
  if (ctx.rank() != args.root) return Status::success();
  Contributions srcs;
  WEFT_RETURN_IF_ERROR(srcs.read(ctx, block, 0));
  for (size_t p = 0; p < static_cast<size_t>(ctx.size()); ++p) {
    copy_bytes(static_cast<std::byte*>(args.recv) + p * block, srcs[p], block);
  }
  return Status::success();
}

Status scatter_shared(Context& ctx, const CollectiveArgs& args) {
  const size_t block = args.count * args.elem_size();
  const bool root = ctx.rank() == args.root;
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, root ? static_cast<size_t>(ctx.size()) * block : 0));
  auto src = contribution(ctx, args.root, static_cast<size_t>(ctx.size()) * block);
  if (!src.ok()) return src.status();
  copy_bytes(args.recv, src.value() + static_cast<size_t>(ctx.rank()) * block, block);
  return Status::success();
}

Status alltoall_shared(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  const size_t block = args.count * args.elem_size();
  const size_t total = static_cast<size_t>(n) * block;
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, total));
  Contributions srcs;
  WEFT_RETURN_IF_ERROR(srcs.read(ctx, total, static_cast<size_t>(ctx.rank()) * block));
  for (size_t p = 0; p < static_cast<size_t>(n); ++p) {
    copy_bytes(static_cast<std::byte*>(args.recv) + p * block, srcs[p], block);
  }
  return Status::success();
}

Status barrier_shared(Context& ctx, const CollectiveArgs& args) {
  (void)args;
  WEFT_RETURN_IF_ERROR(publish(ctx, nullptr, 0));
  Contributions srcs;
  return srcs.read(ctx, 0, 0);
}

}  // namespace weft::coll
