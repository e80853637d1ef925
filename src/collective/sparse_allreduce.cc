// sparse_allreduce: the sum of the rows every rank holds of a num_rows x row_width table.
//
// 1. Each rank counts its distinct rows and the ranks allgather (distinct rows, num_rows).
// 2. The algorithm is the forced one (Options::algorithm), else dense when 3 ranks or more hold
//    1.5 tables' worth of distinct rows together (sparse_algorithm: the crossover measured in
//    docs/algorithms.md, "Sparse allreduce"). Every rank decides from the same numbers.
// 3. gather_merge: each rank writes its rows, coalesced (ascending indices, a repeated row summed
//    in input order), into its block of an allgatherv of bytes; every rank then merges the
//    ranks' sorted blocks, summing each row's contributions in rank order (reduce_in_order).
//    dense: each rank adds its rows into a zeroed table and marks them in a bitmap; the table
//    is allreduced (sum) and the bitmap (bor); the result is the rows whose bit is set.
// Every rank computes the same bits: the merge sums in one order everywhere, and an allreduce's
// result is the same on every rank. What peers send is checked before it is used: their counts
// against the table, their indices for order and range.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collective/algorithms.h"
#include "collective/collective.h"
#include "collective/util.h"
#include "runtime/buffer_pool.h"
#include "weft/communicator.h"

namespace weft::coll {
namespace {

constexpr size_t kIndexBytes = sizeof(int64_t);

// Each step's slots (Context::set_slot_offset): steps number theirs from 0, by step of their
// algorithm, which stays far below 2^17 for any world size weft runs.
constexpr uint32_t kStepSlots = 1u << 17;
constexpr uint32_t kCountsStep = 0, kRowsStep = 1, kBitmapStep = 2, kTableStep = 3;

// What the ranks tell each other first.
struct Meta {
  uint64_t rows;      // distinct rows this rank holds
  uint64_t num_rows;  // the table's, which must agree
};

// This rank's rows as the chosen algorithm needs them: counted, and sorted when not already.
struct Local {
  size_t rows = 0;         // distinct
  bool ascending = false;  // indices strictly ascending: already coalesced, used as they are
  // (index, position) in ascending order, once sorted (not when ascending).
  std::vector<std::pair<int64_t, size_t>> order;
};

bool strictly_ascending(const int64_t* idx, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    if (idx[i] <= idx[i - 1]) return false;
  }
  return true;
}

// A stable LSD radix sort by index (validated to be below num_rows) of pairs that are in position
// order, so the result is in (index, position) order: 11 bits a pass, two passes for a million
// rows, linear in the rows where a comparison sort is n log n.
void radix_sort(std::vector<std::pair<int64_t, size_t>>& v, size_t num_rows) {
  constexpr int kBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  const int bits = std::bit_width(num_rows > 0 ? num_rows - 1 : 0);
  std::vector<std::pair<int64_t, size_t>> tmp(v.size());
  std::vector<size_t> start(size_t{1} << kBits);
  for (int shift = 0; shift < bits; shift += kBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const auto& e : v) ++start[(static_cast<uint64_t>(e.first) >> shift) & kMask];
    size_t sum = 0;
    for (size_t& c : start) sum += std::exchange(c, sum);
    for (const auto& e : v) tmp[start[(static_cast<uint64_t>(e.first) >> shift) & kMask]++] = e;
    v.swap(tmp);
  }
}

void sort_rows(const CollectiveArgs& a, Local& l) {
  if (l.ascending || !l.order.empty() || a.count == 0) return;
  l.order.resize(a.count);
  for (size_t i = 0; i < a.count; ++i) l.order[i] = {a.indices[i], i};
  if (a.count < 256) {
    std::sort(l.order.begin(), l.order.end());
  } else {
    radix_sort(l.order, a.num_rows);
  }
}

Local count_rows(const CollectiveArgs& a) {
  Local l;
  l.ascending = strictly_ascending(a.indices, a.count);
  if (l.ascending) {
    l.rows = a.count;
    return l;
  }
  sort_rows(a, l);
  for (size_t i = 0; i < l.order.size(); ++i) {
    if (i == 0 || l.order[i].first != l.order[i - 1].first) ++l.rows;
  }
  return l;
}

size_t round_up8(size_t x) { return (x + 7) & ~size_t{7}; }

// Bytes of a rank's block in the gather: `rows` indices, then the rows, padded so that the next
// block's indices are aligned. False when it does not fit a size_t.
bool block_bytes(uint64_t rows, size_t row_bytes, size_t* out) {
  size_t per_row = 0, bytes = 0;
  if (__builtin_add_overflow(row_bytes, kIndexBytes, &per_row) ||
      __builtin_mul_overflow(rows, per_row, &bytes) || bytes > SIZE_MAX - 7) {
    return false;
  }
  *out = round_up8(bytes);
  return true;
}

// Results outlive the operation (the caller owns them) and often the communicator, so their
// memory comes from a pool of its own that is never destroyed. Training drops each step's
// gradient before the next step's arrives, so the same buffers come back every step: fresh pages
// cost a fault each on first touch (11-17 us per 4 KiB page on the VMs weft is measured on; a
// 25 MiB result took longer to fault in than to allreduce).
// Two buffers a size class (a step's result and the next one's) and 512 MiB in all are kept.
BufferPool& result_pool() {
  // Leaked on purpose: results may be freed after static destructors have run.
  static auto* pool = new BufferPool(2, size_t{512} << 20);
  return *pool;
}

template <typename T>
std::shared_ptr<T[]> result_buffer(size_t elems) {
  const size_t bytes = std::max<size_t>(elems * sizeof(T), 1);  // never null, even when empty
  return std::shared_ptr<T[]>(static_cast<T*>(result_pool().acquire(bytes)),
                              [bytes](T* p) { result_pool().release(p, bytes); });
}

SparseRows make_result(size_t rows, size_t row_bytes) {
  SparseRows out;
  out.nnz = rows;
  out.indices = result_buffer<int64_t>(rows);
  out.values = result_buffer<std::byte>(rows * row_bytes);
  return out;
}

Status error(const Context& ctx, ErrorCode code, const std::string& what) {
  return Status(code, fmt::format("rank {}: {}: {}", ctx.rank(), ctx.fingerprint().describe(),
                                  what));
}

// An in-place step.
CollectiveArgs nested(OpKind kind, void* buf, size_t count, DataType dtype, ReduceOp op) {
  return CollectiveArgs::of(kind, buf, buf, count, dtype, op);
}

// ---- gather_merge -------------------------------------------------------------------------------

// This rank's rows, coalesced, into its block: l.rows ascending indices, then their rows.
void coalesce_into(const CollectiveArgs& a, const Local& l, size_t row_bytes, std::byte* block) {
  auto* idx = reinterpret_cast<int64_t*>(block);
  std::byte* rows = block + l.rows * kIndexBytes;
  const auto* values = static_cast<const std::byte*>(a.send);
  if (l.ascending) {
    copy_bytes(idx, a.indices, a.count * kIndexBytes);
    copy_bytes(rows, values, a.count * row_bytes);
    return;
  }
  size_t out = 0;
  for (size_t i = 0; i < l.order.size(); ++i) {
    const auto [index, pos] = l.order[i];
    const std::byte* row = values + pos * row_bytes;
    if (i > 0 && index == l.order[i - 1].first) {
      if (row_bytes > 0) reduce_into(rows + (out - 1) * row_bytes, row, a.row_width, a.dtype, a.op);
      continue;
    }
    idx[out] = index;
    copy_bytes(rows + out * row_bytes, row, row_bytes);
    ++out;
  }
}

// One rank's block of the gather.
struct Block {
  const int64_t* idx;
  const std::byte* rows;
  size_t count;
};

// A peer's block must hold strictly ascending indices inside the table.
Status check_block(const Context& ctx, int peer, const Block& b, size_t num_rows) {
  for (size_t i = 0; i < b.count; ++i) {
    const int64_t v = b.idx[i];
    if (v < 0 || static_cast<uint64_t>(v) >= num_rows || (i > 0 && v <= b.idx[i - 1])) {
      return error(ctx, ErrorCode::protocol,
                   fmt::format("rank {} sent row index {} at position {} of {} (indices must "
                               "ascend inside the table's {} rows)",
                               peer, v, i, b.count, num_rows));
    }
  }
  return Status::success();
}

// Walks the union of the blocks' indices in ascending order, calling f(index, ranks holding it)
// with the ranks in rank order.
template <typename F>
void merge_blocks(const std::vector<Block>& blocks, std::vector<size_t>& pos,
                  std::vector<int>& holders, F&& f) {
  const int n = static_cast<int>(blocks.size());
  std::fill(pos.begin(), pos.end(), 0);
  while (true) {
    int64_t low = std::numeric_limits<int64_t>::max();
    holders.clear();
    for (int r = 0; r < n; ++r) {
      const size_t p = pos[static_cast<size_t>(r)];
      const Block& b = blocks[static_cast<size_t>(r)];
      if (p == b.count) continue;
      if (b.idx[p] < low) {
        low = b.idx[p];
        holders.clear();
      }
      if (b.idx[p] == low) holders.push_back(r);
    }
    if (holders.empty()) return;
    f(low, holders);
    for (int r : holders) ++pos[static_cast<size_t>(r)];
  }
}

Status gather_merge(Context& ctx, const CollectiveArgs& a, Local& l, const std::vector<Meta>& meta,
                    size_t row_bytes) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t un = static_cast<size_t>(n);
  std::vector<size_t> counts(un), displs(un);
  size_t total = 0;
  for (size_t r = 0; r < un; ++r) {
    if (!block_bytes(meta[r].rows, row_bytes, &counts[r]) || counts[r] > SIZE_MAX - total) {
      return error(ctx, ErrorCode::protocol,
                   fmt::format("rank {} announces {} rows, more than memory holds", r,
                               meta[r].rows));
    }
    displs[r] = total;
    total += counts[r];
  }
  WEFT_ASSIGN_OR_RETURN(std::byte* buf, ctx.scratch(total));
  sort_rows(a, l);
  std::byte* own = buf + displs[static_cast<size_t>(me)];
  coalesce_into(a, l, row_bytes, own);

  CollectiveArgs g = nested(OpKind::allgatherv, buf, counts[static_cast<size_t>(me)],
                            DataType::uint8, ReduceOp::sum);
  g.send = own;
  g.recv_counts = counts;
  g.recv_displs = displs;
  ctx.set_slot_offset(kRowsStep * kStepSlots);
  WEFT_RETURN_IF_ERROR(run_nested(ctx, g));

  std::vector<Block> blocks(un);
  for (size_t r = 0; r < un; ++r) {
    const std::byte* b = buf + displs[r];
    blocks[r] = {reinterpret_cast<const int64_t*>(b), b + meta[r].rows * kIndexBytes,
                 static_cast<size_t>(meta[r].rows)};
    if (static_cast<int>(r) != me) {
      WEFT_RETURN_IF_ERROR(check_block(ctx, static_cast<int>(r), blocks[r], a.num_rows));
    }
  }
  std::vector<size_t> pos(un);
  std::vector<int> holders;
  holders.reserve(un);
  size_t rows = 0;
  merge_blocks(blocks, pos, holders, [&](int64_t, const std::vector<int>&) { ++rows; });

  SparseRows out = make_result(rows, row_bytes);
  std::vector<const std::byte*> srcs;
  srcs.reserve(un);
  size_t i = 0;
  merge_blocks(blocks, pos, holders, [&](int64_t index, const std::vector<int>& hs) {
    srcs.clear();
    for (int r : hs) {
      const Block& b = blocks[static_cast<size_t>(r)];
      srcs.push_back(b.rows + pos[static_cast<size_t>(r)] * row_bytes);
    }
    out.indices[i] = index;
    reduce_in_order(out.values.get() + i * row_bytes, srcs, a.row_width, a);
    ++i;
  });
  *a.sparse_out = std::move(out);
  return Status::success();
}

// ---- dense ----------------------------------------------------------------------------------------

Status dense(Context& ctx, const CollectiveArgs& a, size_t row_bytes) {
  const size_t words = a.num_rows / 64 + (a.num_rows % 64 != 0 ? 1 : 0);
  WEFT_ASSIGN_OR_RETURN(std::byte* bit_bytes, ctx.scratch(words * sizeof(uint64_t)));
  auto* bits = reinterpret_cast<uint64_t*>(bit_bytes);
  WEFT_ASSIGN_OR_RETURN(std::byte* table, ctx.scratch(a.num_rows * row_bytes));
  if (words > 0) std::memset(bits, 0, words * sizeof(uint64_t));
  if (row_bytes > 0 && a.num_rows > 0) std::memset(table, 0, a.num_rows * row_bytes);
  const auto* values = static_cast<const std::byte*>(a.send);
  for (size_t i = 0; i < a.count; ++i) {
    const auto row = static_cast<size_t>(a.indices[i]);
    bits[row / 64] |= uint64_t{1} << (row % 64);
    if (row_bytes > 0) {
      reduce_into(table + row * row_bytes, values + i * row_bytes, a.row_width, a.dtype, a.op);
    }
  }
  ctx.set_slot_offset(kBitmapStep * kStepSlots);
  WEFT_RETURN_IF_ERROR(
      run_nested(ctx, nested(OpKind::allreduce, bits, words, DataType::int64, ReduceOp::bor)));
  if (row_bytes > 0) {
    ctx.set_slot_offset(kTableStep * kStepSlots);
    WEFT_RETURN_IF_ERROR(run_nested(
        ctx, nested(OpKind::allreduce, table, a.num_rows * a.row_width, a.dtype, a.op)));
  }
  // A peer may set bits past the table's end: they name no row.
  if (a.num_rows % 64 != 0) bits[words - 1] &= (uint64_t{1} << (a.num_rows % 64)) - 1;
  size_t rows = 0;
  for (size_t w = 0; w < words; ++w) rows += static_cast<size_t>(std::popcount(bits[w]));

  SparseRows out = make_result(rows, row_bytes);
  size_t i = 0;
  for (size_t w = 0; w < words; ++w) {
    for (uint64_t m = bits[w]; m != 0; m &= m - 1) {
      const size_t row = w * 64 + static_cast<size_t>(std::countr_zero(m));
      out.indices[i] = static_cast<int64_t>(row);
      copy_bytes(out.values.get() + i * row_bytes, table + row * row_bytes, row_bytes);
      ++i;
    }
  }
  *a.sparse_out = std::move(out);
  return Status::success();
}

}  // namespace

Status sparse_allreduce(Context& ctx, const CollectiveArgs& a) {
  const size_t row_bytes = a.row_width * a.elem_size();
  const size_t n = static_cast<size_t>(ctx.size());
  Local local = count_rows(a);

  std::vector<Meta> meta(n);
  meta[static_cast<size_t>(ctx.rank())] = {local.rows, a.num_rows};
  static_assert(sizeof(Meta) == 2 * sizeof(int64_t));
  CollectiveArgs g = nested(OpKind::allgather, meta.data(), 2, DataType::int64, ReduceOp::sum);
  g.send = &meta[static_cast<size_t>(ctx.rank())];
  ctx.set_slot_offset(kCountsStep * kStepSlots);
  WEFT_RETURN_IF_ERROR(run_nested(ctx, g));

  uint64_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    if (meta[r].num_rows != a.num_rows) {
      return error(ctx, ErrorCode::mismatch,
                   fmt::format("rank {} passes a table of {} rows, this rank one of {}", r,
                               meta[r].num_rows, a.num_rows));
    }
    if (meta[r].rows > a.num_rows) {
      return error(ctx, ErrorCode::protocol,
                   fmt::format("rank {} announces {} distinct rows of a table of {}", r,
                               meta[r].rows, a.num_rows));
    }
    total = meta[r].rows > UINT64_MAX - total ? UINT64_MAX : total + meta[r].rows;
  }
  if (sparse_algorithm(total, a.num_rows, ctx.size(), ctx.options()) == Algorithm::dense) {
    return dense(ctx, a, row_bytes);
  }
  return gather_merge(ctx, a, local, meta, row_bytes);
}

}  // namespace weft::coll

namespace weft {

// The crossover (docs/algorithms.md, "Sparse allreduce", has the measurements and the command):
// with a 1M x 64 float32 table dense overtook gather_merge between 1.2 and 2 tables' worth of
// rows on 4 ranks, and never on 2 ranks (at most 2 tables: every rank holding every row), so dense
// from 1.5 tables on, with 3 ranks or more.
Algorithm sparse_algorithm(uint64_t total_rows, size_t num_rows, int world_size,
                           const Options& options) {
  const Algorithm forced = options.algorithm(OpKind::sparse_allreduce);
  if (forced == Algorithm::gather_merge || forced == Algorithm::dense) return forced;
  const uint64_t threshold = uint64_t{num_rows} + num_rows / 2;  // num_rows < 2^63
  const bool dense = world_size >= 3 && num_rows > 0 && total_rows >= threshold;
  return dense ? Algorithm::dense : Algorithm::gather_merge;
}

}  // namespace weft
