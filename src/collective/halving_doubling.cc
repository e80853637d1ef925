#include "collective/halving_doubling.h"

namespace weft::coll {

Status halving_reduce_scatter(Context& ctx, const CollectiveArgs& args, const Fold& fold,
                              const std::vector<size_t>& vstart, const std::byte* cur,
                              std::byte* work, std::byte* tmp, uint32_t slot_base) {
  const size_t es = args.elem_size();
  const int v = fold.vrank(ctx.rank());
  int lo = 0, hi = fold.p;
  uint32_t slot = slot_base;
  for (int mask = fold.p / 2; mask >= 1; mask /= 2, ++slot) {
    const int peer = fold.real(v ^ mask);
    const int mid = lo + (hi - lo) / 2;
    const bool keep_low = (v & mask) == 0;
    const int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
    const int give_lo = keep_low ? mid : lo, give_hi = keep_low ? hi : mid;
    const size_t keep_at = vstart[static_cast<size_t>(keep_lo)];
    const size_t keep_n = vstart[static_cast<size_t>(keep_hi)] - keep_at;
    const size_t give_at = vstart[static_cast<size_t>(give_lo)];
    const size_t give_n = vstart[static_cast<size_t>(give_hi)] - give_at;
    WEFT_RETURN_IF_ERROR(
        ctx.sendrecv(peer, cur + give_at * es, give_n * es, peer, tmp, keep_n * es, slot));
    reduce2(work + keep_at * es, cur + keep_at * es, tmp, keep_n, args);
    cur = work;
    lo = keep_lo;
    hi = keep_hi;
  }
  return Status::success();
}

Status doubling_allgather(Context& ctx, size_t es, const Fold& fold,
                          const std::vector<size_t>& vstart, std::byte* buf, uint32_t slot_base) {
  const int v = fold.vrank(ctx.rank());
  uint32_t slot = slot_base;
  for (int mask = 1; mask < fold.p; mask *= 2, ++slot) {
    const int pv = v ^ mask;
    const size_t mine_lo = static_cast<size_t>(v & ~(mask - 1));
    const size_t peer_lo = static_cast<size_t>(pv & ~(mask - 1));
    const size_t mine_at = vstart[mine_lo], mine_n = vstart[mine_lo + mask] - mine_at;
    const size_t peer_at = vstart[peer_lo], peer_n = vstart[peer_lo + mask] - peer_at;
    WEFT_RETURN_IF_ERROR(ctx.sendrecv(fold.real(pv), buf + mine_at * es, mine_n * es,
                                      fold.real(pv), buf + peer_at * es, peer_n * es, slot));
  }
  return Status::success();
}

}  // namespace weft::coll
