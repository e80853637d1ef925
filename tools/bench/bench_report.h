// The output of `weft bench`: nccl-tests style columns on stdout (rank 0 only) and, with --json,
// the same rows as a JSON document.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_case.h"

namespace weft::bench {

struct Measurement {
  double time_us = 0;           // max over ranks of the per-iteration average
  double algbw = 0;             // GB/s: bytes / time
  double busbw = 0;             // GB/s: algbw * bus_factor
  std::optional<size_t> wrong;  // elements wrong, summed over ranks; empty without --check
};

struct BenchRow {
  OpKind kind = OpKind::allreduce;
  CaseShape shape;
  BenchParams params;
  std::optional<Measurement> out_of_place;  // empty where the collective has no such form
  std::optional<Measurement> in_place;
};

// Fills algbw and busbw from time_us.
void derive_bandwidth(Measurement& m, size_t bytes, double bus_factor);

std::string table_header(OpKind kind, const std::string& algorithm);
std::string table_row(const BenchRow& row);
// "# Avg bus bandwidth    : 1.234 " over every measured column of `rows`.
std::string table_footer(const std::vector<BenchRow>& rows);

// {"world_size":..,"options":..,"rows":[{..}]}
std::string rows_json(const std::vector<BenchRow>& rows, int world_size,
                      const std::string& options);

}  // namespace weft::bench
