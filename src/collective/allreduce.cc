// allreduce: ring, recursive doubling, halving-doubling (Rabenseifner) and direct.
// recv = OP over every rank's send (count elements); in place when send == recv.
#include <vector>

#include "collective/algorithms.h"
#include "collective/halving_doubling.h"
#include "collective/ring.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

// Slots: the fold and unfold of non-power-of-two groups get their own.
constexpr uint32_t kFoldSlot = 0;
constexpr uint32_t kUnfoldSlot = 1;
constexpr uint32_t kFirstStepSlot = 2;

Status copy_only(const CollectiveArgs& args) {
  copy_bytes(args.recv, args.send, args.count * args.elem_size());
  return Status::success();
}

// Folded-out even rank of a non-power-of-two group: hands its input to r + 1 and receives the
// finished result from it.
Status sit_out(Context& ctx, const CollectiveArgs& args) {
  const size_t bytes = args.count * args.elem_size();
  const int partner = ctx.rank() + 1;
  // Posted before the send: in place, the result lands where the input is read from, which is
  // safe because the partner sends the result only after it has received the input.
  const Handle hs[2] = {ctx.irecv(partner, kUnfoldSlot, args.recv, bytes),
                        ctx.isend(partner, kFoldSlot, args.send, bytes)};
  return ctx.wait_all(hs);
}

// Folded-in odd rank: recv = send OP the partner's input.
Status fold_in(Context& ctx, const CollectiveArgs& args, std::byte* tmp) {
  const size_t bytes = args.count * args.elem_size();
  WEFT_RETURN_IF_ERROR(ctx.recv(ctx.rank() - 1, kFoldSlot, tmp, bytes));
  reduce2(args.recv, args.send, tmp, args.count, args);
  return Status::success();
}

Status unfold(Context& ctx, const CollectiveArgs& args) {
  return ctx.send(ctx.rank() - 1, kUnfoldSlot, args.recv, args.count * args.elem_size());
}

}  // namespace

Status allreduce_ring(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size();
  if (n == 1) return copy_only(args);
  const size_t es = args.elem_size();
  const BlockLayout blocks = BlockLayout::even(args.count, n);
  auto* recv = static_cast<std::byte*>(args.recv);
  // Rank r finishes block r+1, then the allgather phase spreads it.
  const size_t own = static_cast<size_t>(mod(ctx.rank() + 1, n));
  WEFT_RETURN_IF_ERROR(ring_reduce_scatter(ctx, args, static_cast<const std::byte*>(args.send),
                                           recv, recv + blocks.offset[own] * es, blocks, 1, 0));
  return ring_allgather(ctx, recv, es, blocks, 1, static_cast<uint32_t>(n));
}

Status allreduce_recursive_doubling(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  if (n == 1) return copy_only(args);
  const Fold fold(n);
  if (fold.sits_out(r)) return sit_out(ctx, args);
  const size_t bytes = args.count * args.elem_size();
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch(bytes));
  const void* cur = args.send;
  if (fold.folded(r)) {
    WEFT_RETURN_IF_ERROR(fold_in(ctx, args, tmp));
    cur = args.recv;
  }
  const int v = fold.vrank(r);
  uint32_t slot = kFirstStepSlot;
  for (int mask = 1; mask < fold.p; mask *= 2, ++slot) {
    const int peer = fold.real(v ^ mask);
    WEFT_RETURN_IF_ERROR(ctx.sendrecv(peer, cur, bytes, peer, tmp, bytes, slot));
    // Both partners compute the same commutative OP of the same two vectors: same bits.
    reduce2(args.recv, cur, tmp, args.count, args);
    cur = args.recv;
  }
  finish_avg(args.recv, args.count, args, n);
  if (fold.folded(r)) return unfold(ctx, args);
  return Status::success();
}

Status allreduce_halving_doubling(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  if (n == 1) return copy_only(args);
  const Fold fold(n);
  if (fold.sits_out(r)) return sit_out(ctx, args);
  const size_t es = args.elem_size();
  auto* recv = static_cast<std::byte*>(args.recv);
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch(args.count * es));
  const std::byte* cur = static_cast<const std::byte*>(args.send);
  if (fold.folded(r)) {
    WEFT_RETURN_IF_ERROR(fold_in(ctx, args, tmp));
    cur = recv;
  }
  const BlockLayout pieces = BlockLayout::even(args.count, fold.p);
  std::vector<size_t> vstart = pieces.offset;
  vstart.push_back(args.count);
  WEFT_RETURN_IF_ERROR(
      halving_reduce_scatter(ctx, args, fold, vstart, cur, recv, tmp, kFirstStepSlot));
  const size_t v = static_cast<size_t>(fold.vrank(r));
  finish_avg(recv + vstart[v] * es, vstart[v + 1] - vstart[v], args, n);
  const uint32_t gather_slot = kFirstStepSlot + 32;
  WEFT_RETURN_IF_ERROR(doubling_allgather(ctx, es, fold, vstart, recv, gather_slot));
  if (fold.folded(r)) return unfold(ctx, args);
  return Status::success();
}

Status allreduce_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  if (n == 1) return copy_only(args);
  const size_t bytes = args.count * args.elem_size();
  if (bytes == 0) return Status::success();
  // One slot per peer, plus a copy of this rank's input when it is in place and would be
  // overwritten before its turn in the rank-order reduction.
  const bool save_own = args.in_place() && r >= 2;
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch((static_cast<size_t>(n) - 1 + save_own) * bytes));
  std::vector<const std::byte*> srcs(static_cast<size_t>(n));
  std::vector<Handle> hs;
  hs.reserve(2 * static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    std::byte* slot = tmp + static_cast<size_t>(p < r ? p : p - 1) * bytes;
    srcs[static_cast<size_t>(p)] = slot;
    hs.push_back(ctx.irecv(p, 0, slot, bytes));
  }
  for (int i = 1; i < n; ++i) hs.push_back(ctx.isend(mod(r + i, n), 0, args.send, bytes));
  WEFT_RETURN_IF_ERROR(ctx.wait_all(hs));
  srcs[static_cast<size_t>(r)] = static_cast<const std::byte*>(args.send);
  if (save_own) {
    std::byte* own = tmp + (static_cast<size_t>(n) - 1) * bytes;
    copy_bytes(own, args.send, bytes);
    srcs[static_cast<size_t>(r)] = own;
  }
  reduce_in_order(args.recv, srcs, args.count, args);
  finish_avg(args.recv, args.count, args, n);
  return Status::success();
}

}  // namespace weft::coll
