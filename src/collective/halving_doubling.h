// The power-of-two phases of recursive halving and doubling, over the virtual ranks of a Fold.
//
// `vstart` (p + 1 entries, in elements) cuts the buffer into one piece per virtual rank; piece v
// is [vstart[v], vstart[v + 1]). Folded-out ranks (Fold::sits_out) must not call these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/context.h"
#include "collective/util.h"

namespace weft::coll {

// Recursive halving: in step k this rank swaps half of its current range with the virtual rank
// whose bit p/2^(k+1) differs and reduces the half it keeps. `cur` holds this rank's full input;
// results go to `work` (may equal `cur`); `tmp` holds at least half of the buffer. On success
// piece vrank of `work` is reduced over every rank (not finished for avg).
Status halving_reduce_scatter(Context& ctx, const CollectiveArgs& args, const Fold& fold,
                              const std::vector<size_t>& vstart, const std::byte* cur,
                              std::byte* work, std::byte* tmp, uint32_t slot_base);

// Recursive doubling: piece vrank of `buf` is this rank's on entry; in step k it swaps its
// 2^k pieces with the virtual rank whose bit 2^k differs. On success every piece is filled.
Status doubling_allgather(Context& ctx, size_t elem_size, const Fold& fold,
                          const std::vector<size_t>& vstart, std::byte* buf, uint32_t slot_base);

}  // namespace weft::coll
