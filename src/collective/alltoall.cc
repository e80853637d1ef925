// alltoall and alltoallv: pairwise exchange and direct.
// alltoall: block j of rank i's send (count elements) lands in block i of rank j's recv.
// alltoallv: send_counts[j] elements at send + send_displs[j] go to rank j, landing at
// recv + recv_displs[i] there. In place when send == recv: the input is first copied to scratch.
#include <algorithm>
#include <vector>

#include "collective/algorithms.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

struct Layouts {
  BlockLayout send, recv;
};

Layouts layouts_of(const CollectiveArgs& args, int n) {
  if (args.kind == OpKind::alltoallv) {
    return {BlockLayout::from(args.send_counts, args.send_displs),
            BlockLayout::from(args.recv_counts, args.recv_displs)};
  }
  return {BlockLayout::uniform(args.count, n), BlockLayout::uniform(args.count, n)};
}

// The buffer to send from: the caller's, or a scratch copy of it when in place. Also places this
// rank's own block.
Result<const std::byte*> prepare(Context& ctx, const CollectiveArgs& args, const Layouts& l) {
  const size_t es = args.elem_size();
  const auto* src = static_cast<const std::byte*>(args.send);
  if (args.in_place()) {
    size_t extent = 0;
    for (size_t j = 0; j < l.send.blocks(); ++j) {
      if (l.send.size[j] > 0) extent = std::max(extent, l.send.offset[j] + l.send.size[j]);
    }
    WEFT_ASSIGN_OR_RETURN(std::byte* copy, ctx.scratch(extent * es));
    copy_bytes(copy, src, extent * es);
    src = copy;
  }
  const size_t r = static_cast<size_t>(ctx.rank());
  copy_bytes(at(args.recv, l.recv.offset[r], es), src + l.send.offset[r] * es,
             std::min(l.send.size[r], l.recv.size[r]) * es);
  return src;
}

}  // namespace

Status alltoall_pairwise(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  const Layouts l = layouts_of(args, n);
  WEFT_ASSIGN_OR_RETURN(const std::byte* src, prepare(ctx, args, l));
  // Step i: send to r + i, receive from r - i, so every pair meets in exactly one step.
  for (int i = 1; i < n; ++i) {
    const size_t to = static_cast<size_t>(mod(r + i, n));
    const size_t from = static_cast<size_t>(mod(r - i, n));
    WEFT_RETURN_IF_ERROR(ctx.sendrecv(static_cast<int>(to), src + l.send.offset[to] * es,
                                      l.send.size[to] * es, static_cast<int>(from),
                                      at(args.recv, l.recv.offset[from], es),
                                      l.recv.size[from] * es, static_cast<uint32_t>(i)));
  }
  return Status::success();
}

Status alltoall_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = args.elem_size();
  const Layouts l = layouts_of(args, n);
  WEFT_ASSIGN_OR_RETURN(const std::byte* src, prepare(ctx, args, l));
  std::vector<Handle> hs;
  for (int i = 1; i < n; ++i) {
    const size_t from = static_cast<size_t>(mod(r - i, n));
    hs.push_back(ctx.irecv(static_cast<int>(from), 0, at(args.recv, l.recv.offset[from], es),
                           l.recv.size[from] * es));
  }
  for (int i = 1; i < n; ++i) {
    const size_t to = static_cast<size_t>(mod(r + i, n));
    hs.push_back(ctx.isend(static_cast<int>(to), 0, src + l.send.offset[to] * es,
                           l.send.size[to] * es));
  }
  return ctx.wait_all(hs);
}

}  // namespace weft::coll
