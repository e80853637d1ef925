// Hierarchy: collectives of a job that spans hosts, run inside each host over shared memory and
// between hosts over TCP.
//
// Built by CommunicatorImpl::create when transport=auto finds ranks on more than one host and at
// least one host with several ranks. It holds two sub-communicators per rank: `local` (the ranks
// of this host, in global rank order, over shm) and `cross` (the ranks with the same local index
// on every host that has one, in host order, over TCP); cross of local index 0 joins the hosts'
// leaders. The collectives are compositions of flat ones on those (DESIGN.md: hierarchical
// algorithms are compositions over sub-contexts):
//  - allreduce: with the same number of ranks L on every host and a count divisible by L, every
//    local rank owns a slice (local reduce_scatter, cross allreduce of the slice, local
//    allgather), so every rank's link and core work; otherwise through the leaders (local reduce,
//    leaders' allreduce, local broadcast);
//  - broadcast: to the root host's leader, among leaders, then inside every host;
//  - allgather: with the same number of ranks on every host and 16 KiB or more in all, every
//    local rank gathers its local index's blocks across hosts, then the host exchanges those
//    bundles; otherwise local gather to the leader, leaders' allgatherv of whole hosts, reorder,
//    local broadcast;
//  - reduce_scatter: likewise a local reduce_scatter of the blocks grouped by local index, then a
//    cross reduce_scatter per local index; otherwise local reduce to the leader, leaders'
//    allreduce, local scatter.
// avg runs as sum and is scaled once at the end (hosts may hold different numbers of ranks).
// Every rank takes the same path for the same call, so sub-operations match across ranks.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "collective/context.h"
#include "core/link_security.h"
#include "transport/host_layout.h"
#include "weft/options.h"
#include "weft/store.h"

namespace weft {

class BufferPool;
class CommunicatorImpl;

// Flat or hierarchical, by measured cost (the collective's algorithm left to auto). Per collective
// kind and payload size class (bytes rounded up to a power of two), the first three calls run
// hierarchically and the next three flat (in runs: switching between the two ways leaves the
// other's threads asleep, docs/algorithms.md); each
// rank keeps the fastest call of each way (the first of a run pays for cold buffers and
// threads), and right after the sixth call the
// ranks take the maximum of those costs over all ranks (a two-value allreduce under a sequence
// number reserved with the sixth call), so every rank decides alike. Later calls of that class
// run the cheaper way. Call order decides which call is which, so every rank plans the same
// call the same way.
class HierarchyChoice {
 public:
  static constexpr int kTrials = 6;

  // At submission, in call order: the call's index within its class (below kTrials / 2:
  // hierarchical trial, then flat trials; the last trial also agrees afterwards; from kTrials
  // on: as decided).
  int admit(OpKind kind, size_t bytes);
  // At execution: whether call `index` of the class runs hierarchically.
  bool hierarchical(OpKind kind, size_t bytes, int index) const;
  // At execution, after trial call `index` succeeded in `seconds`.
  void record(OpKind kind, size_t bytes, int index, double seconds);
  // This rank's costs of the class, {hierarchical, flat}, for the agreement.
  std::array<double, 2> costs(OpKind kind, size_t bytes) const;
  // The agreed (maximum over ranks) costs: later calls run the cheaper way.
  void decide(OpKind kind, size_t bytes, const std::array<double, 2>& agreed);

 private:
  struct Class {
    int calls = 0;                  // admitted (submission side)
    double best[2] = {1e300, 1e300};  // fastest trial: [0] hierarchical, [1] flat
    std::atomic<bool> flat{false};  // decided: flat is cheaper (read at submission too)
  };
  Class& at(OpKind kind, size_t bytes);
  const Class& at(OpKind kind, size_t bytes) const;
  Class classes_[4][65];
};

class Hierarchy {
 public:
  // Collective over the parent communicator (all ranks call it in the same order).
  static Result<std::unique_ptr<Hierarchy>> create(const HostLayout& layout, int rank,
                                                   const Options& options,
                                                   std::shared_ptr<Store> store, int machine_ranks,
                                                   const LinkSecurity& security);
  ~Hierarchy();

  // Whether `args` runs here rather than flat: kinds the hierarchy implements, unless a flat
  // algorithm is forced for them.
  static bool handles(const CollectiveArgs& args, const Options& options);
  Status run(const CollectiveArgs& args, BufferPool& pool);
  // Ends the sub-communicators' pending work (the parent failed or was aborted).
  void abort(const std::string& reason);
  void shutdown();

 private:
  Hierarchy() = default;
  Status allreduce(const CollectiveArgs& a, BufferPool& pool);
  Status broadcast(const CollectiveArgs& a);
  Status allgather(const CollectiveArgs& a, BufferPool& pool);
  Status reduce_scatter(const CollectiveArgs& a, BufferPool& pool);
  // Every local rank owns a slice (uniform layouts, see slices()).
  Status allgather_slices(const CollectiveArgs& a, BufferPool& pool);
  Status reduce_scatter_slices(const CollectiveArgs& a, BufferPool& pool);
  // allgather and reduce_scatter of `a` run per slice: the same number of ranks (more than one)
  // on every host, and at least kSliceBytes in all (below, the leaders' fewer messages win; the
  // measurements are in docs/algorithms.md, "Hierarchical collectives").
  static constexpr size_t kSliceBytes = 16 * 1024;
  bool slices(const CollectiveArgs& a) const {
    return layout_.uniform() && layout_.hosts.front().size() > 1 &&
           a.count * a.elem_size() * layout_.host_of.size() >= kSliceBytes;
  }
  Status on_local(const CollectiveArgs& a);
  Status on_cross(const CollectiveArgs& a);
  bool leader() const { return layout_.local_index[static_cast<size_t>(rank_)] == 0; }

  HostLayout layout_;
  int rank_ = 0;
  std::unique_ptr<CommunicatorImpl> local_;
  std::unique_ptr<CommunicatorImpl> cross_;
  std::string local_names_;  // "0=job rank 2, 1=job rank 3" (errors of local_ number its ranks)
  std::string cross_names_;
};

}  // namespace weft
