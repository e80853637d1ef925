// barrier: dissemination, binomial tree and direct. Messages carry no payload.
#include <vector>

#include "collective/algorithms.h"
#include "collective/util.h"

namespace weft::coll {

Status barrier_dissemination(Context& ctx, const CollectiveArgs&) {
  const int n = ctx.size(), r = ctx.rank();
  // Round k: signal r + 2^k, wait for r - 2^k. After ceil(log2 n) rounds every rank has heard,
  // directly or not, from every other.
  uint32_t slot = 0;
  for (int dist = 1; dist < n; dist *= 2, ++slot) {
    WEFT_RETURN_IF_ERROR(ctx.sendrecv(mod(r + dist, n), nullptr, 0, mod(r - dist, n), nullptr, 0,
                                      slot));
  }
  return Status::success();
}

Status barrier_binomial(Context& ctx, const CollectiveArgs&) {
  const int n = ctx.size(), r = ctx.rank();
  constexpr uint32_t kUp = 0, kDown = 1;
  const int limit = r == 0 ? n : lowbit(r);
  std::vector<int> children;
  for (int mask = 1; mask < limit && r + mask < n; mask *= 2) children.push_back(r + mask);
  // Up: hear from the whole subtree, then tell the parent. Down: the release travels back.
  std::vector<Handle> hs;
  for (int c : children) hs.push_back(ctx.irecv(c, kUp, nullptr, 0));
  WEFT_RETURN_IF_ERROR(ctx.wait_all(hs));
  if (r != 0) {
    const int parent = r - lowbit(r);
    WEFT_RETURN_IF_ERROR(ctx.send(parent, kUp, nullptr, 0));
    WEFT_RETURN_IF_ERROR(ctx.recv(parent, kDown, nullptr, 0));
  }
  hs.clear();
  for (int c : children) hs.push_back(ctx.isend(c, kDown, nullptr, 0));
  return ctx.wait_all(hs);
}

Status barrier_direct(Context& ctx, const CollectiveArgs&) {
  const int n = ctx.size(), r = ctx.rank();
  constexpr uint32_t kArrive = 0, kRelease = 1;
  if (r != 0) {
    const Handle hs[2] = {ctx.irecv(0, kRelease, nullptr, 0), ctx.isend(0, kArrive, nullptr, 0)};
    return ctx.wait_all(hs);
  }
  std::vector<Handle> hs;
  for (int p = 1; p < n; ++p) hs.push_back(ctx.irecv(p, kArrive, nullptr, 0));
  WEFT_RETURN_IF_ERROR(ctx.wait_all(hs));
  hs.clear();
  for (int p = 1; p < n; ++p) hs.push_back(ctx.isend(p, kRelease, nullptr, 0));
  return ctx.wait_all(hs);
}

}  // namespace weft::coll
