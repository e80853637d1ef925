// reduce: binomial tree, pipelined chain ("ring") and direct.
// The root's recv = OP over every rank's send; in place at the root when send == recv. recv is
// not touched on other ranks.
#include <algorithm>
#include <utility>
#include <vector>

#include "collective/algorithms.h"
#include "collective/util.h"

namespace weft::coll {

Status reduce_binomial(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  const size_t bytes = args.count * es;
  const int vr = mod(r - args.root, n);
  // Children vr + 1, vr + 2, vr + 4, ... below this rank's lowest set bit; all their partial
  // results are received at once, each into its own slot.
  const int limit = vr == 0 ? n : lowbit(vr);
  std::vector<int> children;
  for (int mask = 1; mask < limit && vr + mask < n; mask *= 2) children.push_back(vr + mask);
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch(children.size() * bytes));
  std::vector<Handle> recvs;
  for (size_t i = 0; i < children.size(); ++i) {
    recvs.push_back(ctx.irecv(mod(children[i] + args.root, n), 0, tmp + i * bytes, bytes));
  }
  // The running result: recv at the root, scratch on inner ranks; leaves send their input.
  std::byte* acc = nullptr;
  if (vr == 0) {
    acc = static_cast<std::byte*>(args.recv);
  } else if (!children.empty()) {
    WEFT_ASSIGN_OR_RETURN(acc, ctx.scratch(bytes));
  }
  const void* cur = args.send;
  for (size_t i = 0; i < children.size(); ++i) {
    WEFT_RETURN_IF_ERROR(ctx.wait(recvs[i]));
    reduce2(acc, cur, tmp + i * bytes, args.count, args);
    cur = acc;
  }
  if (vr == 0) {
    copy_bytes(args.recv, cur, bytes);  // only when n == 1
    finish_avg(args.recv, args.count, args, n);
    return Status::success();
  }
  return ctx.send(mod(vr - lowbit(vr) + args.root, n), 0, cur, bytes);
}

Status reduce_ring(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  if (n == 1) {
    copy_bytes(args.recv, args.send, args.count * es);
    return Status::success();
  }
  // Chain root+1 -> root+2 -> ... -> root: each rank adds its input to every chunk passing by.
  const int pos = mod(r - args.root - 1, n);
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  const bool is_root = r == args.root;
  const size_t chunk = chunk_elems(ctx, es);
  const size_t chunks = (args.count + chunk - 1) / chunk;
  auto len = [&](size_t c) { return std::min(chunk, args.count - c * chunk); };
  std::vector<Handle> sends;
  if (pos == 0) {
    for (size_t c = 0; c < chunks; ++c) {
      sends.push_back(ctx.isend(next, 0, at(args.send, c * chunk, es), len(c) * es));
    }
    return ctx.wait_all(sends);
  }
  if (chunks == 0) return Status::success();
  // Incoming chunks alternate between two buffers; outgoing partial sums rotate through
  // kOutSlots buffers, each reused only once its previous send is complete.
  constexpr size_t kOutSlots = 4;
  WEFT_ASSIGN_OR_RETURN(std::byte* in, ctx.scratch(2 * chunk * es));
  std::byte* out = nullptr;
  if (!is_root) {
    WEFT_ASSIGN_OR_RETURN(out, ctx.scratch(kOutSlots * chunk * es));
  }
  std::vector<Handle> out_pending(kOutSlots, nullptr);
  auto post = [&](size_t c) { return ctx.irecv(prev, 0, in + (c % 2) * chunk * es, len(c) * es); };
  Handle current = post(0);
  for (size_t c = 0; c < chunks; ++c) {
    Handle following = c + 1 < chunks ? post(c + 1) : nullptr;
    WEFT_RETURN_IF_ERROR(ctx.wait(current));
    std::byte* dst;
    if (is_root) {
      dst = at(args.recv, c * chunk, es);
    } else {
      Handle& slot = out_pending[c % kOutSlots];
      if (slot != nullptr) WEFT_RETURN_IF_ERROR(ctx.wait(std::exchange(slot, nullptr)));
      dst = out + (c % kOutSlots) * chunk * es;
    }
    reduce2(dst, at(args.send, c * chunk, es), in + (c % 2) * chunk * es, len(c), args);
    if (!is_root) out_pending[c % kOutSlots] = ctx.isend(next, 0, dst, len(c) * es);
    current = following;
  }
  if (is_root) {
    finish_avg(args.recv, args.count, args, n);
    return Status::success();
  }
  for (Handle h : out_pending) {
    if (h != nullptr) sends.push_back(h);
  }
  return ctx.wait_all(sends);
}

Status reduce_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t bytes = args.count * args.elem_size();
  if (bytes == 0) return Status::success();  // no messages at all, on any rank
  if (r != args.root) return ctx.send(args.root, 0, args.send, bytes);
  if (n == 1) {
    copy_bytes(args.recv, args.send, bytes);
    return Status::success();
  }
  WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch((static_cast<size_t>(n) - 1) * bytes));
  std::vector<Handle> recvs;
  std::vector<const std::byte*> srcs(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    std::byte* slot = tmp + static_cast<size_t>(p < r ? p : p - 1) * bytes;
    srcs[static_cast<size_t>(p)] = slot;
    recvs.push_back(ctx.irecv(p, 0, slot, bytes));
  }
  WEFT_RETURN_IF_ERROR(ctx.wait_all(recvs));
  // Own input first, so recv may alias it (in place).
  std::vector<const std::byte*> order{static_cast<const std::byte*>(args.send)};
  for (int p = 0; p < n; ++p) {
    if (p != r) order.push_back(srcs[static_cast<size_t>(p)]);
  }
  reduce_in_order(args.recv, order, args.count, args);
  finish_avg(args.recv, args.count, args, n);
  return Status::success();
}

}  // namespace weft::coll
