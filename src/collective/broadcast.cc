// broadcast: binomial tree, pipelined chain ("ring") and direct.
// The root's send is copied to recv on every rank (the root included); in place when
// send == recv. Only the root reads send.
#include <algorithm>
#include <vector>

#include "collective/algorithms.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

// The root's own copy; returns the buffer the root sends from.
const void* root_source(const CollectiveArgs& args) {
  copy_bytes(args.recv, args.send, args.count * args.elem_size());
  return args.send;
}

}  // namespace

Status broadcast_binomial(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t bytes = args.count * args.elem_size();
  const int vr = mod(r - args.root, n);
  const void* src = args.recv;
  int mask = 1;
  if (vr == 0) {
    src = root_source(args);
    while (mask < n) mask *= 2;
  } else {
    // The parent clears this rank's lowest set bit.
    mask = lowbit(vr);
    WEFT_RETURN_IF_ERROR(ctx.recv(mod(vr - mask + args.root, n), 0, args.recv, bytes));
  }
  std::vector<Handle> sends;
  for (mask /= 2; mask > 0; mask /= 2) {
    if (vr + mask < n) sends.push_back(ctx.isend(mod(vr + mask + args.root, n), 0, src, bytes));
  }
  return ctx.wait_all(sends);
}

Status broadcast_ring(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  // Chain root -> root+1 -> ... -> root-1; each chunk is forwarded as soon as it arrives.
  const int pos = mod(r - args.root, n);
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  const bool last = pos == n - 1;
  const size_t chunk = chunk_elems(ctx, es);
  const size_t chunks = (args.count + chunk - 1) / chunk;
  auto piece = [&](size_t c) { return std::min(chunk, args.count - c * chunk) * es; };
  std::vector<Handle> sends;
  if (pos == 0) {
    const void* src = root_source(args);
    if (n == 1) return Status::success();
    for (size_t c = 0; c < chunks; ++c) {
      sends.push_back(ctx.isend(next, 0, at(src, c * chunk, es), piece(c)));
    }
    return ctx.wait_all(sends);
  }
  constexpr size_t kWindow = 4;
  std::vector<Handle> recvs(chunks, nullptr);
  size_t posted = 0;
  for (size_t c = 0; c < chunks; ++c) {
    for (; posted < chunks && posted <= c + kWindow; ++posted) {
      recvs[posted] = ctx.irecv(prev, 0, at(args.recv, posted * chunk, es), piece(posted));
    }
    WEFT_RETURN_IF_ERROR(ctx.wait(recvs[c]));
    if (!last) sends.push_back(ctx.isend(next, 0, at(args.recv, c * chunk, es), piece(c)));
  }
  return ctx.wait_all(sends);
}

Status broadcast_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t bytes = args.count * args.elem_size();
  if (r != args.root) return ctx.recv(args.root, 0, args.recv, bytes);
  const void* src = root_source(args);
  std::vector<Handle> sends;
  for (int i = 1; i < n; ++i) sends.push_back(ctx.isend(mod(r + i, n), 0, src, bytes));
  return ctx.wait_all(sends);
}

}  // namespace weft::coll
