// Byte sizes on the command line: "8", "4K", "64M", "1G" (K = 1024; an optional trailing B or
// iB is accepted, so "64MiB" and "64MB" are 64 * 2^20 too).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "weft/status.h"

namespace weft::bench {

Result<size_t> parse_size(std::string_view text);
// min, min*factor, ... up to and including max.
std::vector<size_t> size_sweep(size_t min, size_t max, size_t factor);

}  // namespace weft::bench
