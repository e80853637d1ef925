// Rank layout for `weft run`: which host each rank pretends to live on, and its local rank and
// local size there. Pure data, no processes; unit-tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/status.h"

namespace weft::launcher {

struct RankPlacement {
  int rank = 0;
  int size = 0;
  int local_rank = 0;   // index among the ranks with the same host_id, in rank order
  int local_size = 0;   // number of ranks with the same host_id
  std::string host_id;  // empty: WEFT_HOST_ID is not set for this rank
};

// Places `size` ranks. `host_id` (if not empty) applies to every rank; `host_ids` is a comma list
// of exactly `size` ids, one per rank, and may not be combined with `host_id`. With neither, all
// ranks share one (unnamed) host.
Result<std::vector<RankPlacement>> place_ranks(int size, const std::string& host_id,
                                               const std::string& host_ids);

// The WEFT_* variables one rank gets: WEFT_RANK, WEFT_SIZE, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE,
// WEFT_STORE_ADDR and WEFT_HOST_ID when the placement names a host. "NAME=value" strings.
std::vector<std::string> rank_environment(const RankPlacement& placement,
                                          const std::string& store_addr);

// The torch.distributed variables (env:// init) one rank gets: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, and MASTER_ADDR=127.0.0.1 plus MASTER_PORT=master_port unless
// `keep_master` (the user set them). weft's own bootstrap prefers the WEFT_* variables.
std::vector<std::string> torch_environment(const RankPlacement& placement, uint16_t master_port,
                                           bool keep_master);

}  // namespace weft::launcher
