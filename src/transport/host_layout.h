// Which ranks share a host: the identity a rank publishes and the layout every rank derives from
// the published identities. The transport factory picks shared memory, TCP or both from it, and
// core's Hierarchy splits a communicator along it.
#pragma once

#include <string>
#include <vector>

namespace weft {

// Hostname plus the kernel boot id: equal only for processes on the same running kernel.
std::string default_host_id();

// Where every rank of a job lives, from the ranks' host keys.
struct HostLayout {
  std::vector<std::vector<int>>
      hosts;                     // global ranks of each host, ascending; hosts by lowest rank
  std::vector<int> host_of;      // rank -> index in hosts
  std::vector<int> local_index;  // rank -> index in its host's list

  static HostLayout from_keys(const std::vector<std::string>& keys);
  int host_count() const { return static_cast<int>(hosts.size()); }
  size_t max_local() const;
  bool uniform() const;  // every host has the same number of ranks
  // "2 hosts (2+2 ranks)"
  std::string describe() const;
};

}  // namespace weft
