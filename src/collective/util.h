// Small helpers shared by the collective algorithms: byte offsets, guarded copies and reductions,
// block layouts, chunking, and the folding of non-power-of-two groups.
//
// Pointers may be null when their element count is 0; every helper here skips zero-sized work so
// no library call ever sees a null pointer.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "collective/context.h"
#include "reduce/reduce.h"

// `lhs = value of expr` when the Result `expr` is ok, else returns its status from the enclosing
// function. `lhs` may declare a variable (`WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch(n))`);
// it expands to several statements, so give it braces under an if.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL_(WEFT_ASSIGN_OR_RETURN_NAME_(weft_result_, __LINE__), lhs, expr)
#define WEFT_ASSIGN_OR_RETURN_NAME_INNER_(a, b) a##b
#define WEFT_ASSIGN_OR_RETURN_NAME_(a, b) WEFT_ASSIGN_OR_RETURN_NAME_INNER_(a, b)
#define WEFT_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                  \
  if (!result.ok()) return result.status();              \
  lhs = result.value()

namespace weft::coll {

inline std::byte* at(void* p, size_t elems, size_t elem_size) {
  return static_cast<std::byte*>(p) + elems * elem_size;
}
inline const std::byte* at(const void* p, size_t elems, size_t elem_size) {
  return static_cast<const std::byte*>(p) + elems * elem_size;
}

inline void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

// dst = a OP b over `count` elements of args.dtype (avg reduces as sum).
inline void reduce2(void* dst, const void* a, const void* b, size_t count,
                    const CollectiveArgs& args) {
  if (count > 0) reduce_out_of_place(dst, a, b, count, args.dtype, args.op);
}

// The finishing step of avg, applied once where the result lands.
inline void finish_avg(void* buf, size_t count, const CollectiveArgs& args, int n) {
  if (args.op == ReduceOp::avg && count > 0 && n > 1) scale_for_avg(buf, count, args.dtype, n);
}

// dst = srcs[0] OP srcs[1] OP ... in rank order, so that every rank computing the same reduction
// gets the same bits. dst may equal srcs[0] or srcs[1] but no later source.
void reduce_in_order(void* dst, std::span<const std::byte* const> srcs, size_t count,
                     const CollectiveArgs& args);

// Blocks of a buffer, in elements: block b covers [offset[b], offset[b] + size[b]).
struct BlockLayout {
  std::vector<size_t> offset, size;

  size_t blocks() const { return offset.size(); }
  // `count` split into `parts` blocks whose sizes differ by at most one element.
  static BlockLayout even(size_t count, int parts);
  // `parts` blocks of `count` elements each, back to back.
  static BlockLayout uniform(size_t count, int parts);
  static BlockLayout from(const std::vector<size_t>& counts, const std::vector<size_t>& displs);
};

// Elements per pipelining chunk (Options::chunk_bytes, at least one element).
inline size_t chunk_elems(const Context& ctx, size_t elem_size) {
  const size_t e = ctx.options().chunk_bytes / elem_size;
  return e > 0 ? e : 1;
}

// Non-power-of-two groups fold into p = 2^floor(log2 n) virtual ranks: the first 2*rem ranks
// (rem = n - p) pair up, the even one of each pair hands its data to the odd one and sits out the
// power-of-two phase; the odd one acts as virtual rank r/2; rank r >= 2*rem is virtual r - rem.
// Virtual rank v stands for the real ranks [first_real(v), first_real(v + 1)), a contiguous range.
struct Fold {
  explicit Fold(int n);
  int n, p, rem;

  bool sits_out(int r) const { return r < 2 * rem && r % 2 == 0; }
  bool folded(int r) const { return r < 2 * rem && r % 2 == 1; }  // holds its partner's data
  int vrank(int r) const { return r < 2 * rem ? (r % 2 == 1 ? r / 2 : -1) : r - rem; }
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  // The lowest real rank (and so block) that virtual rank v stands for; first_real(p) == n.
  int first_real(int v) const { return v < rem ? 2 * v : v + rem; }
};

inline int mod(long x, int n) {
  const long m = x % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

inline int lowbit(int x) { return x & -x; }

}  // namespace weft::coll
