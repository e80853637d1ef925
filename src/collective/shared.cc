// Collectives through shared buffers (Algorithm::shm_direct).
//
// Every rank copies its whole input into its own shared buffer once (shared_begin, copy,
// shared_publish), then reads what it needs from every rank's buffer in place: one write and one
// wait per peer, no message, no matching, no intermediate hop. Outputs are written only from the
// buffers, so any aliasing of send and receive (in place) behaves as if the input were read first.
// Reductions combine the buffers in rank order, so every rank computing the same element gets the
// same bits. The transport keeps a rank's buffer unchanged until every peer has finished reading
// it (Transport::shared_begin), and a peer that publishes a different collective is a mismatch.
#include <fmt/format.h>

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

// Every rank's contribution, in rank order, each at least `need` bytes long.
Result<std::vector<const std::byte*>> all_contributions(Context& ctx, size_t need) {
  std::vector<const std::byte*> srcs(static_cast<size_t>(ctx.size()));
  // Peers after this rank first: with ranks sharing cores, the next rank tends to publish first.
  for (int i = 0; i < ctx.size(); ++i) {
    const int p = mod(ctx.rank() + 1 + i, ctx.size());
    auto c = contribution(ctx, p, need);
    if (!c.ok()) return c.status();
    srcs[static_cast<size_t>(p)] = c.value();
  }
  return srcs;
}

// dst = srcs[0] OP srcs[1] OP ... (offset `elems` into each), finished for avg.
void reduce_all(void* dst, const std::vector<const std::byte*>& srcs, size_t elems, size_t count,
                const CollectiveArgs& args, int n) {
  std::vector<const std::byte*> at_offset(srcs.size());
  for (size_t i = 0; i < srcs.size(); ++i) at_offset[i] = at(srcs[i], elems, args.elem_size());
  if (at_offset.size() == 1) {
    copy_bytes(dst, at_offset[0], count * args.elem_size());
  } else {
    reduce_in_order(dst, at_offset, count, args);
  }
  finish_avg(dst, count, args, n);
}

}  // namespace

Status allreduce_shm(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, bytes));
  auto srcs = all_contributions(ctx, bytes);
  if (!srcs.ok()) return srcs.status();
  reduce_all(args.recv, srcs.value(), 0, args.count, args, ctx.size());
  return Status::success();
}

Status reduce_scatter_shm(Context& ctx, const CollectiveArgs& args) {
  const size_t total = static_cast<size_t>(ctx.size()) * args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, total));
  auto srcs = all_contributions(ctx, total);
  if (!srcs.ok()) return srcs.status();
  reduce_all(args.recv, srcs.value(), static_cast<size_t>(ctx.rank()) * args.count, args.count,
             args, ctx.size());
  return Status::success();
}

Status allgather_shm(Context& ctx, const CollectiveArgs& args) {
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

Status broadcast_shm(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  const bool root = ctx.rank() == args.root;
  // Every rank publishes (non-roots nothing): that is how the root learns its buffer was read.
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, root ? bytes : 0));
  auto src = contribution(ctx, args.root, bytes);
  if (!src.ok()) return src.status();
  copy_bytes(args.recv, src.value(), bytes);
  return Status::success();
}

Status reduce_shm(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, bytes));
  if (ctx.rank() != args.root) return Status::success();
  auto srcs = all_contributions(ctx, bytes);
  if (!srcs.ok()) return srcs.status();
  reduce_all(args.recv, srcs.value(), 0, args.count, args, ctx.size());
  return Status::success();
}

Status gather_shm(Context& ctx, const CollectiveArgs& args) {
  const size_t block = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, block));
  if (ctx.rank() != args.root) return Status::success();
  auto srcs = all_contributions(ctx, block);
  if (!srcs.ok()) return srcs.status();
  for (size_t p = 0; p < srcs->size(); ++p) {
    copy_bytes(static_cast<std::byte*>(args.recv) + p * block, (*srcs)[p], block);
  }
  return Status::success();
}

Status scatter_shm(Context& ctx, const CollectiveArgs& args) {
  const size_t block = args.count * args.elem_size();
  const bool root = ctx.rank() == args.root;
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, root ? static_cast<size_t>(ctx.size()) * block : 0));
  auto src = contribution(ctx, args.root, static_cast<size_t>(ctx.size()) * block);
  if (!src.ok()) return src.status();
  copy_bytes(args.recv, src.value() + static_cast<size_t>(ctx.rank()) * block, block);
  return Status::success();
}

Status alltoall_shm(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  const size_t block = args.count * args.elem_size();
  const size_t total = static_cast<size_t>(n) * block;
  WEFT_RETURN_IF_ERROR(publish(ctx, args.send, total));
  auto srcs = all_contributions(ctx, total);
  if (!srcs.ok()) return srcs.status();
  for (size_t p = 0; p < srcs->size(); ++p) {
    copy_bytes(static_cast<std::byte*>(args.recv) + p * block,
               (*srcs)[p] + static_cast<size_t>(ctx.rank()) * block, block);
  }
  return Status::success();
}

Status barrier_shm(Context& ctx, const CollectiveArgs& args) {
  (void)args;
  WEFT_RETURN_IF_ERROR(publish(ctx, nullptr, 0));
  auto srcs = all_contributions(ctx, 0);
  return srcs.ok() ? Status::success() : srcs.status();
}

}  // namespace weft::coll
