// gather and scatter: binomial tree and direct.
// gather: the root's recv holds n blocks of `count`; rank r's send lands in block r. In place at
// the root when send == recv + root * count. scatter: block r of the root's send lands in rank
// r's recv; in place at the root when recv == send + root * count. Only the root touches the
// n-block buffer.
//
// The binomial trees work in root-relative order (virtual rank vr = rank - root mod n): the
// subtree of vr is the contiguous range [vr, vr + subtree(vr)), so every message is one
// contiguous run of blocks. A root other than 0 rotates through scratch.
#include <algorithm>
#include <vector>

#include "collective/algorithms.h"
#include "collective/util.h"

namespace weft::coll {
namespace {

int subtree(int vr, int n) { return vr == 0 ? n : std::min(lowbit(vr), n - vr); }

// Children of vr, largest subtree first.
std::vector<int> children_of(int vr, int n) {
  std::vector<int> out;
  const int limit = vr == 0 ? n : lowbit(vr);
  int top = 1;
  while (top * 2 < limit) top *= 2;
  for (int mask = top; mask >= 1; mask /= 2) {
    if (mask < limit && vr + mask < n) out.push_back(vr + mask);
  }
  return out;
}

// Copies blocks [1, n) of a root-relative buffer to / from their ranks' places in `abs`.
void relative_to_absolute(std::byte* abs, const std::byte* rel, int root, int n, size_t block) {
  for (int j = 1; j < n; ++j) {
    copy_bytes(abs + static_cast<size_t>(mod(root + j, n)) * block,
               rel + static_cast<size_t>(j) * block, block);
  }
}
void absolute_to_relative(std::byte* rel, const std::byte* abs, int root, int n, size_t block) {
  for (int j = 1; j < n; ++j) {
    copy_bytes(rel + static_cast<size_t>(j) * block,
               abs + static_cast<size_t>(mod(root + j, n)) * block, block);
  }
}

}  // namespace

Status gather_binomial(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank(), root = args.root;
  const size_t block = args.count * args.elem_size();
  const int vr = mod(r - root, n);
  const std::vector<int> children = children_of(vr, n);
  // buf: this rank's subtree in relative order, own block first.
  std::byte* buf;
  if (vr == 0) {
    auto* recv = static_cast<std::byte*>(args.recv);
    copy_bytes(recv + static_cast<size_t>(root) * block, args.send, block);
    if (root == 0) {
      buf = recv;
    } else {
      WEFT_ASSIGN_OR_RETURN(buf, ctx.scratch(static_cast<size_t>(n) * block));
    }
  } else if (children.empty()) {
    return ctx.send(mod(vr - lowbit(vr) + root, n), 0, args.send, block);
  } else {
    WEFT_ASSIGN_OR_RETURN(buf, ctx.scratch(static_cast<size_t>(subtree(vr, n)) * block));
    copy_bytes(buf, args.send, block);
  }
  std::vector<Handle> recvs;
  for (int c : children) {
    recvs.push_back(ctx.irecv(mod(c + root, n), 0, buf + static_cast<size_t>(c - vr) * block,
                              static_cast<size_t>(subtree(c, n)) * block));
  }
  WEFT_RETURN_IF_ERROR(ctx.wait_all(recvs));
  if (vr != 0) {
    return ctx.send(mod(vr - lowbit(vr) + root, n), 0, buf,
                    static_cast<size_t>(subtree(vr, n)) * block);
  }
  if (root != 0) relative_to_absolute(static_cast<std::byte*>(args.recv), buf, root, n, block);
  return Status::success();
}

Status gather_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t block = args.count * args.elem_size();
  if (r != args.root) return ctx.send(args.root, 0, args.send, block);
  auto* recv = static_cast<std::byte*>(args.recv);
  copy_bytes(recv + static_cast<size_t>(r) * block, args.send, block);
  std::vector<Handle> recvs;
  for (int i = 1; i < n; ++i) {
    const int from = mod(r + i, n);
    recvs.push_back(ctx.irecv(from, 0, recv + static_cast<size_t>(from) * block, block));
  }
  return ctx.wait_all(recvs);
}

Status scatter_binomial(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank(), root = args.root;
  const size_t block = args.count * args.elem_size();
  const int vr = mod(r - root, n);
  const std::vector<int> children = children_of(vr, n);
  // src: this rank's subtree in relative order, own block first.
  const std::byte* src;
  if (vr == 0) {
    const auto* send = static_cast<const std::byte*>(args.send);
    copy_bytes(args.recv, send + static_cast<size_t>(root) * block, block);
    if (root == 0) {
      src = send;
    } else {
      WEFT_ASSIGN_OR_RETURN(std::byte* rel, ctx.scratch(static_cast<size_t>(n) * block));
      absolute_to_relative(rel, send, root, n, block);
      src = rel;
    }
  } else if (children.empty()) {
    return ctx.recv(mod(vr - lowbit(vr) + root, n), 0, args.recv, block);
  } else {
    WEFT_ASSIGN_OR_RETURN(std::byte* buf, ctx.scratch(static_cast<size_t>(subtree(vr, n)) * block));
    WEFT_RETURN_IF_ERROR(ctx.recv(mod(vr - lowbit(vr) + root, n), 0, buf,
                                  static_cast<size_t>(subtree(vr, n)) * block));
    copy_bytes(args.recv, buf, block);
    src = buf;
  }
  std::vector<Handle> sends;
  for (int c : children) {
    sends.push_back(ctx.isend(mod(c + root, n), 0, src + static_cast<size_t>(c - vr) * block,
                              static_cast<size_t>(subtree(c, n)) * block));
  }
  return ctx.wait_all(sends);
}

Status scatter_direct(Context& ctx, const CollectiveArgs& args) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t block = args.count * args.elem_size();
  if (r != args.root) return ctx.recv(args.root, 0, args.recv, block);
  const auto* send = static_cast<const std::byte*>(args.send);
  copy_bytes(args.recv, send + static_cast<size_t>(r) * block, block);
  std::vector<Handle> sends;
  for (int i = 1; i < n; ++i) {
    const int to = mod(r + i, n);
    sends.push_back(ctx.isend(to, 0, send + static_cast<size_t>(to) * block, block));
  }
  return ctx.wait_all(sends);
}

}  // namespace weft::coll
