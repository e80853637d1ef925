#include "collective/ring.h"

#include <algorithm>
#include <vector>

namespace weft::coll {
namespace {

// One chunk of one step: `len` elements at `off` within the step's received block.
struct Unit {
  int step;
  size_t off, len;
};

// The chunks received in steps 0..n-2, in the order they are processed.
std::vector<Unit> plan_units(int n, const BlockLayout& blocks, size_t chunk,
                             int (*recv_block)(int step, int base, int n), int base) {
  std::vector<Unit> units;
  for (int t = 0; t + 1 < n; ++t) {
    const size_t size = blocks.size[static_cast<size_t>(recv_block(t, base, n))];
    for (size_t off = 0; off < size; off += chunk) {
      units.push_back({t, off, std::min(chunk, size - off)});
    }
  }
  return units;
}

// Posts the chunks of `block` as step-`step` sends.
void send_block(Context& ctx, std::vector<Handle>& sends, int to, uint32_t slot,
                const std::byte* base, size_t size, size_t chunk, size_t es) {
  for (size_t off = 0; off < size; off += chunk) {
    sends.push_back(ctx.isend(to, slot, base + off * es, std::min(chunk, size - off) * es));
  }
}

// Received in step t: reduce-scatter's (base = rank + shift - 2) and allgather's
// (base = rank + shift - 1) blocks walk backwards around the ring.
int block_of_step(int step, int base, int n) { return mod(static_cast<long>(base) - step, n); }

}  // namespace

Status ring_reduce_scatter(Context& ctx, const CollectiveArgs& args, const std::byte* in,
                           std::byte* work, std::byte* out_final, const BlockLayout& blocks,
                           int shift, uint32_t slot_base) {
  const int n = ctx.size(), r = ctx.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t es = args.elem_size();
  const size_t chunk = chunk_elems(ctx, es);
  const int recv_base = r + shift - 2;  // block received in step t: recv_base - t

  std::vector<Handle> sends;
  // Step 0 sends this rank's own contribution to the block it never receives.
  const size_t first = static_cast<size_t>(mod(r + shift - 1, n));
  send_block(ctx, sends, right, slot_base, in + blocks.offset[first] * es, blocks.size[first],
             chunk, es);

  const std::vector<Unit> units = plan_units(n, blocks, chunk, block_of_step, recv_base);
  if (!units.empty()) {
    // Two receive buffers: chunk k+1 lands in one while chunk k is reduced out of the other.
    WEFT_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch(2 * chunk * es));
    auto post = [&](size_t k) {
      const Unit& u = units[k];
      return ctx.irecv(left, slot_base + static_cast<uint32_t>(u.step), tmp + (k % 2) * chunk * es,
                       u.len * es);
    };
    Handle current = post(0);
    for (size_t k = 0; k < units.size(); ++k) {
      const Unit& u = units[k];
      Handle next = k + 1 < units.size() ? post(k + 1) : nullptr;
      WEFT_RETURN_IF_ERROR(ctx.wait(current));
      const size_t b = static_cast<size_t>(block_of_step(u.step, recv_base, n));
      const bool last = u.step == n - 2;
      std::byte* dst = last ? out_final + u.off * es : work + (blocks.offset[b] + u.off) * es;
      reduce2(dst, in + (blocks.offset[b] + u.off) * es, tmp + (k % 2) * chunk * es, u.len, args);
      if (last) {
        finish_avg(dst, u.len, args, n);
      } else {
        sends.push_back(ctx.isend(right, slot_base + static_cast<uint32_t>(u.step + 1), dst,
                                  u.len * es));
      }
      current = next;
    }
  }
  return ctx.wait_all(sends);
}

Status ring_allgather(Context& ctx, std::byte* buf, size_t es, const BlockLayout& blocks,
                      int shift, uint32_t slot_base) {
  const int n = ctx.size(), r = ctx.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t chunk = chunk_elems(ctx, es);
  const int recv_base = r + shift - 1;  // block received in step t: recv_base - t

  std::vector<Handle> sends;
  const size_t own = static_cast<size_t>(mod(r + shift, n));
  send_block(ctx, sends, right, slot_base, buf + blocks.offset[own] * es, blocks.size[own], chunk,
             es);

  const std::vector<Unit> units = plan_units(n, blocks, chunk, block_of_step, recv_base);
  auto where = [&](const Unit& u) {
    const size_t b = static_cast<size_t>(block_of_step(u.step, recv_base, n));
    return buf + (blocks.offset[b] + u.off) * es;
  };
  // Receives go straight to their final place, so several may be posted ahead.
  constexpr size_t kWindow = 4;
  std::vector<Handle> recvs(units.size(), nullptr);
  size_t posted = 0;
  for (size_t k = 0; k < units.size(); ++k) {
    for (; posted < units.size() && posted <= k + kWindow; ++posted) {
      const Unit& u = units[posted];
      recvs[posted] =
          ctx.irecv(left, slot_base + static_cast<uint32_t>(u.step), where(u), u.len * es);
    }
    WEFT_RETURN_IF_ERROR(ctx.wait(recvs[k]));
    const Unit& u = units[k];
    if (u.step + 1 < n - 1) {
      sends.push_back(
          ctx.isend(right, slot_base + static_cast<uint32_t>(u.step + 1), where(u), u.len * es));
    }
  }
  return ctx.wait_all(sends);
}

}  // namespace weft::coll
