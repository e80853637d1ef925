#include "tools/launcher/rank_layout.h"

#include <map>

namespace weft::launcher {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t comma = s.find(',', begin);
    parts.push_back(s.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return parts;
}

}  // namespace

Result<std::vector<RankPlacement>> place_ranks(int size, const std::string& host_id,
                                               const std::string& host_ids) {
  if (size < 1) {
    return Status(ErrorCode::invalid_argument,
                  "the number of ranks must be at least 1, got " + std::to_string(size));
  }
  if (!host_id.empty() && !host_ids.empty()) {
    return Status(ErrorCode::invalid_argument, "--host-id and --host-ids exclude each other");
  }
  std::vector<std::string> ids(static_cast<size_t>(size), host_id);
  if (!host_ids.empty()) {
    ids = split_commas(host_ids);
    if (ids.size() != static_cast<size_t>(size)) {
      return Status(ErrorCode::invalid_argument, "--host-ids names " + std::to_string(ids.size()) +
                                                     " hosts for " + std::to_string(size) +
                                                     " ranks; give one id per rank");
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].empty()) {
        return Status(ErrorCode::invalid_argument,
                      "--host-ids: the id of rank " + std::to_string(i) + " is empty");
      }
    }
  }

  std::map<std::string, int> per_host;
  for (const auto& id : ids) ++per_host[id];
  std::map<std::string, int> seen;
  std::vector<RankPlacement> placements;
  placements.reserve(ids.size());
  for (int r = 0; r < size; ++r) {
    const std::string& id = ids[static_cast<size_t>(r)];
    RankPlacement p;
    p.rank = r;
    p.size = size;
    p.local_rank = seen[id]++;
    p.local_size = per_host[id];
    p.host_id = id;
    placements.push_back(std::move(p));
  }
  return placements;
}

std::vector<std::string> rank_environment(const RankPlacement& placement,
                                          const std::string& store_addr) {
  std::vector<std::string> env = {
      "WEFT_RANK=" + std::to_string(placement.rank),
      "WEFT_SIZE=" + std::to_string(placement.size),
      "WEFT_LOCAL_RANK=" + std::to_string(placement.local_rank),
      "WEFT_LOCAL_SIZE=" + std::to_string(placement.local_size),
      "WEFT_STORE_ADDR=" + store_addr,
  };
  if (!placement.host_id.empty()) env.push_back("WEFT_HOST_ID=" + placement.host_id);
  return env;
}

std::vector<std::string> torch_environment(const RankPlacement& placement, uint16_t master_port,
                                           bool keep_master) {
  std::vector<std::string> env = {
      "RANK=" + std::to_string(placement.rank),
      "WORLD_SIZE=" + std::to_string(placement.size),
      "LOCAL_RANK=" + std::to_string(placement.local_rank),
      "LOCAL_WORLD_SIZE=" + std::to_string(placement.local_size),
  };
  if (!keep_master) {
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(master_port));
  }
  return env;
}

}  // namespace weft::launcher
