// partition_map (weft/ps.h): the pure function that places a tensor's partitions on shards.
#include <algorithm>

#include "weft/ps.h"

namespace weft::ps {
namespace {

// FNV-1a, 64 bits: simple, stable across platforms and releases (the map is part of the
// protocol: a change here moves tensors between shards).
uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::vector<Partition> partition_map(const std::string& name, size_t count, DataType dtype,
                                     int num_shards) {
  std::vector<Partition> parts;
  const size_t elem = dtype_size(dtype);
  if (elem == 0 || num_shards <= 0) return parts;
  const size_t per_part = std::max<size_t>(1, kPartitionBytes / elem);
  const size_t n = count == 0 ? 1 : (count + per_part - 1) / per_part;
  const uint64_t base = fnv1a64(name);
  parts.reserve(n);
  for (size_t p = 0; p < n; ++p) {
    Partition part;
    part.part = static_cast<uint32_t>(p);
    part.offset = p * per_part;
    part.count = std::min(per_part, count - std::min(count, part.offset));
    part.shard = static_cast<int>((base + p) % static_cast<uint64_t>(num_shards));
    parts.push_back(part);
  }
  return parts;
}

}  // namespace weft::ps
