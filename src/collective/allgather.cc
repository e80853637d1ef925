// allgather and allgatherv: ring, recursive doubling (allgather only) and direct.
// allgather: recv holds n blocks of `count`; rank r's send lands in block r. In place when
// send == recv + r * count (the NCCL convention). allgatherv: rank r's `count` elements land at
// recv + recv_displs[r], recv_counts[r] == count; in place when send == recv + recv_displs[r].
#include <vector>

#include "collective/algorithms.h"
#include "collective/halving_doubling.h"
#include "collective/ring.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

BlockLayout layout_of(const CollectiveArgs& args, int n) {
  if (args.kind == OpKind::allgatherv) return BlockLayout::from(args.recv_counts, args.recv_displs);
  return BlockLayout::uniform(args.count, n);
}

// Puts this rank's contribution into its block (a no-op in place); returns the block.
std::byte* place_own(const CollectiveArgs& args, const BlockLayout& blocks, int r) {
  const size_t es = args.elem_size();
  std::byte* own = at(args.recv, blocks.offset[static_cast<size_t>(r)], es);
  copy_bytes(own, args.send, blocks.size[static_cast<size_t>(r)] * es);
  return own;
}

}  // namespace

Status allgather_ring(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  const BlockLayout blocks = layout_of(args, n);
  place_own(args, blocks, ctx.rank());
  if (n == 1) return Status::success();
  return ring_allgather(ctx, static_cast<std::byte*>(args.recv), args.elem_size(), blocks, 0, 0);
}

Status allgather_recursive_doubling(Context& ctx, const CollectiveArgs& args) {
  if (args.kind == OpKind::allgatherv) return allgather_ring(ctx, args);  // blocks not contiguous
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  const size_t block = args.count * es;
  auto* recv = static_cast<std::byte*>(args.recv);
  std::byte* own = place_own(args, BlockLayout::uniform(args.count, n), r);
  if (n == 1) return Status::success();
  const size_t total = static_cast<size_t>(n) * block;
  const Fold fold(n);
  constexpr uint32_t kFoldSlot = 0, kUnfoldSlot = 1, kFirstStepSlot = 2;
  if (fold.sits_out(r)) {
    // The whole result overwrites this rank's own block with the same bytes, and only after the
    // partner has received them.
    const Handle hs[2] = {ctx.irecv(r + 1, kUnfoldSlot, recv, total),
                          ctx.isend(r + 1, kFoldSlot, own, block)};
    return ctx.wait_all(hs);
  }
  if (fold.folded(r)) {
    WEFT_RETURN_IF_ERROR(
        ctx.recv(r - 1, kFoldSlot, recv + static_cast<size_t>(r - 1) * block, block));
  }
  // Virtual rank v holds the contiguous blocks of the real ranks it stands for.
  std::vector<size_t> vstart(static_cast<size_t>(fold.p) + 1);
  for (int v = 0; v <= fold.p; ++v) {
    vstart[static_cast<size_t>(v)] = static_cast<size_t>(fold.first_real(v)) * args.count;
  }
  WEFT_RETURN_IF_ERROR(doubling_allgather(ctx, es, fold, vstart, recv, kFirstStepSlot));
  if (fold.folded(r)) return ctx.send(r - 1, kUnfoldSlot, recv, total);
  return Status::success();
}

Status allgather_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  const BlockLayout blocks = layout_of(args, n);
  const std::byte* own = place_own(args, blocks, r);
  const size_t own_bytes = blocks.size[static_cast<size_t>(r)] * es;
  std::vector<Handle> hs;
  for (int i = 1; i < n; ++i) {
    const size_t from = static_cast<size_t>(mod(r - i, n));
    hs.push_back(ctx.irecv(static_cast<int>(from), 0, at(args.recv, blocks.offset[from], es),
                           blocks.size[from] * es));
  }
  for (int i = 1; i < n; ++i) hs.push_back(ctx.isend(mod(r + i, n), 0, own, own_bytes));
  return ctx.wait_all(hs);
}

}  // namespace weft::coll
