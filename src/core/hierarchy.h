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
//  - allgather: local gather to the leader, leaders' allgatherv of whole hosts, reorder into
//    global rank order, local broadcast;
//  - reduce_scatter: local reduce to the leader, leaders' allreduce, local scatter.
// avg runs as sum and is scaled once at the end (hosts may hold different numbers of ranks).
// Every rank takes the same path for the same call, so sub-operations match across ranks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective/context.h"
#include "weft/options.h"
#include "weft/store.h"

namespace weft {

class BufferPool;
class CommunicatorImpl;

// Where every rank of a job lives, from the ranks' host keys.
struct HostLayout {
  std::vector<std::vector<int>> hosts;  // global ranks of each host, ascending; hosts by lowest rank
  std::vector<int> host_of;             // rank -> index in hosts
  std::vector<int> local_index;         // rank -> index in its host's list

  static HostLayout from_keys(const std::vector<std::string>& keys);
  int host_count() const { return static_cast<int>(hosts.size()); }
  size_t max_local() const;
  bool uniform() const;  // every host has the same number of ranks
  // "2 hosts (2+2 ranks)"
  std::string describe() const;
};

class Hierarchy {
 public:
  // Collective over the parent communicator (all ranks call it in the same order).
  static Result<std::unique_ptr<Hierarchy>> create(const HostLayout& layout, int rank,
                                                   const Options& options,
                                                   std::shared_ptr<Store> store, int machine_ranks);
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
