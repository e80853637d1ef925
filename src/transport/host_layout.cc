#include "transport/host_layout.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>

namespace weft {

std::string default_host_id() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return std::string(host) + "/" + boot;
}

HostLayout HostLayout::from_keys(const std::vector<std::string>& keys) {
  HostLayout l;
  std::map<std::string, int> index;
  l.host_of.resize(keys.size());
  l.local_index.resize(keys.size());
  for (size_t r = 0; r < keys.size(); ++r) {
    auto [it, added] = index.emplace(keys[r], static_cast<int>(l.hosts.size()));
    if (added) l.hosts.emplace_back();
    auto& members = l.hosts[static_cast<size_t>(it->second)];
    l.host_of[r] = it->second;
    l.local_index[r] = static_cast<int>(members.size());
    members.push_back(static_cast<int>(r));
  }
  return l;
}

size_t HostLayout::max_local() const {
  size_t m = 0;
  for (const auto& h : hosts) m = std::max(m, h.size());
  return m;
}

bool HostLayout::uniform() const {
  for (const auto& h : hosts) {
    if (h.size() != hosts.front().size()) return false;
  }
  return true;
}

std::string HostLayout::describe() const {
  std::string sizes;
  for (const auto& h : hosts) sizes += fmt::format("{}{}", sizes.empty() ? "" : "+", h.size());
  return fmt::format("{} hosts ({} ranks)", hosts.size(), sizes);
}

}  // namespace weft
