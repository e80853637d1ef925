// reduce_scatter: ring, halving-doubling and direct.
// send holds n blocks of `count` elements; rank r receives block r reduced over every rank.
// In place when recv == send + r * count.
#include <vector>

#include "collective/algorithms.h"
#include "collective/halving_doubling.h"
#include "collective/ring.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

constexpr uint32_t kFoldSlot = 0;
constexpr uint32_t kUnfoldSlot = 1;
constexpr uint32_t kFirstStepSlot = 2;

const std::byte* own_block(const CollectiveArgs& args, int r) {
  return at(args.send, static_cast<size_t>(r) * args.count, args.elem_size());
}

Status copy_own(const CollectiveArgs& args) {
  copy_bytes(args.recv, args.send, args.count * args.elem_size());
  return Status::success();
}

}  // namespace

Status reduce_scatter_ring(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  if (n == 1) return copy_own(args);
  const size_t total = static_cast<size_t>(n) * args.count * args.elem_size();
  // Partial sums of the blocks passing through this rank; the final block goes straight to recv.
  WEFT_ASSIGN_OR_RETURN(std::byte* work, ctx.scratch(total));
  return ring_reduce_scatter(ctx, args, static_cast<const std::byte*>(args.send), work,
                             static_cast<std::byte*>(args.recv),
                             BlockLayout::uniform(args.count, n), 0, 0);
}

Status reduce_scatter_halving_doubling(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  if (n == 1) return copy_own(args);
  const size_t es = args.elem_size();
  const size_t block = args.count * es;
  const size_t total = static_cast<size_t>(n) * block;
  const Fold fold(n);
  if (fold.sits_out(r)) {
    // Hand everything to r + 1, which returns this rank's block once reduced. In place the
    // result lands inside the input, after the partner has received it.
    const Handle hs[2] = {ctx.irecv(r + 1, kUnfoldSlot, args.recv, block),
                          ctx.isend(r + 1, kFoldSlot, args.send, total)};
    return ctx.wait_all(hs);
  }
  WEFT_ASSIGN_OR_RETURN(std::byte* work, ctx.scratch(total));
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch(total));
  const std::byte* cur = static_cast<const std::byte*>(args.send);
  if (fold.folded(r)) {
    WEFT_RETURN_IF_ERROR(ctx.recv(r - 1, kFoldSlot, tmp, total));
    reduce2(work, args.send, tmp, static_cast<size_t>(n) * args.count, args);
    cur = work;
  }
  // Virtual rank v ends with the real blocks of the ranks it stands for.
  std::vector<size_t> vstart(static_cast<size_t>(fold.p) + 1);
  for (int v = 0; v <= fold.p; ++v) {
    vstart[static_cast<size_t>(v)] = static_cast<size_t>(fold.first_real(v)) * args.count;
  }
  WEFT_RETURN_IF_ERROR(
      halving_reduce_scatter(ctx, args, fold, vstart, cur, work, tmp, kFirstStepSlot));
  std::byte* mine = work + static_cast<size_t>(r) * block;
  finish_avg(mine, args.count, args, n);
  copy_bytes(args.recv, mine, block);
  if (fold.folded(r)) {
    std::byte* partners = work + static_cast<size_t>(r - 1) * block;
    finish_avg(partners, args.count, args, n);
    return ctx.send(r - 1, kUnfoldSlot, partners, block);
  }
  return Status::success();
}

Status reduce_scatter_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  if (n == 1) return copy_own(args);
  const size_t block = args.count * args.elem_size();
  if (block == 0) return Status::success();
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch((static_cast<size_t>(n) - 1) * block));
  std::vector<Handle> hs;
  for (int i = 1; i < n; ++i) {
    const int from = mod(r - i, n);
    hs.push_back(ctx.irecv(from, 0, tmp + static_cast<size_t>(i - 1) * block, block));
  }
  for (int i = 1; i < n; ++i) {
    const int to = mod(r + i, n);
    hs.push_back(ctx.isend(to, 0, own_block(args, to), block));
  }
  WEFT_RETURN_IF_ERROR(ctx.wait_all(hs));
  // Block r is computed on rank r alone, so any order gives the one result.
  reduce2(args.recv, own_block(args, r), tmp, args.count, args);
  for (int i = 2; i < n; ++i) {
    reduce_into(args.recv, tmp + static_cast<size_t>(i - 1) * block, args.count, args.dtype,
                args.op);
  }
  finish_avg(args.recv, args.count, args, n);
  return Status::success();
}

}  // namespace weft::coll
