// The chunked, pipelined ring phases that ring allreduce, reduce_scatter and allgather(v) are
// built from.
//
// Ranks form the ring r -> r+1. A buffer is cut into one block per rank (a BlockLayout, in
// elements) and every block into chunks of Options::chunk_bytes. In each of the n-1 steps a rank
// sends one block to its right neighbour and receives one from its left; what it received in step
// t is what it sends in step t+1, so the send of chunk c in step t+1 is posted the moment chunk c
// of step t is done, and the receive of the next chunk is posted before the current one is
// reduced: chunks of consecutive steps are in flight together.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective/context.h"
#include "collective/util.h"

namespace weft::coll {

// Reduce-scatter phase. `in` holds this rank's contribution (laid out by `blocks`); partial sums
// go to `work` (same layout; may equal `in`). On success block (rank + shift) mod n, reduced over
// every rank and finished for avg, is at `out_final` (may be the block's place in `work` or in
// `in`). Every send of the phase is complete on return.
Status ring_reduce_scatter(Context& ctx, const CollectiveArgs& args, const std::byte* in,
                           std::byte* work, std::byte* out_final, const BlockLayout& blocks,
                           int shift, uint32_t slot_base);

// Allgather phase. Block (rank + shift) mod n of `buf` is this rank's on entry; on success every
// block is filled. Every send of the phase is complete on return.
Status ring_allgather(Context& ctx, std::byte* buf, size_t elem_size, const BlockLayout& blocks,
                      int shift, uint32_t slot_base);

}  // namespace weft::coll
