#include "collective/util.h"

namespace weft::coll {

void reduce_in_order(void* dst, std::span<const std::byte* const> srcs, size_t count,
                     const CollectiveArgs& args) {
  if (count == 0) return;
  if (srcs.size() == 1) {
    copy_bytes(dst, srcs[0], count * args.elem_size());
    return;
  }
  reduce_out_of_place(dst, srcs[0], srcs[1], count, args.dtype, args.op);
  for (size_t i = 2; i < srcs.size(); ++i) {
    reduce_into(dst, srcs[i], count, args.dtype, args.op);
  }
}

BlockLayout BlockLayout::even(size_t count, int parts) {
  BlockLayout l;
  const size_t p = static_cast<size_t>(parts);
  const size_t base = count / p, extra = count % p;
  l.offset.resize(p);
  l.size.resize(p);
  for (size_t i = 0; i < p; ++i) {
    l.offset[i] = i * base + std::min(i, extra);
    l.size[i] = base + (i < extra ? 1 : 0);
  }
  return l;
}

BlockLayout BlockLayout::uniform(size_t count, int parts) {
  BlockLayout l;
  const size_t p = static_cast<size_t>(parts);
  l.offset.resize(p);
  l.size.assign(p, count);
  for (size_t i = 0; i < p; ++i) l.offset[i] = i * count;
  return l;
}

BlockLayout BlockLayout::from(const std::vector<size_t>& counts,
                              const std::vector<size_t>& displs) {
  BlockLayout l;
  l.size = counts;
  l.offset = displs;
  return l;
}

Fold::Fold(int size) : n(size), p(1), rem(0) {
  while (p * 2 <= n) p *= 2;
  rem = n - p;
}

}  // namespace weft::coll
