// Input patterns and result checks for `weft bench --check`.
//
// Rank r's input element k is a small integer, ((5 r + k) mod 9) + 1, or for prod a 1 or 2 (2
// on exactly one rank per element), so every dtype holds inputs and sums exactly for up to 14
// ranks (int8) and the expected result can be computed in double on every rank independently.
// Receive buffers are cleared to 0 first, a value no correct result contains.
#pragma once

#include <cstddef>

#include "tools/bench/bench_case.h"

namespace weft::bench {

// Clears `recv_buffer` (shape.bytes), then writes this rank's inputs for one call at
// `buffers.send` (which may lie inside recv_buffer when in place).
void fill_inputs(OpKind kind, const CaseShape& shape, const BenchParams& params, int rank,
                 int world_size, const CallBuffers& buffers, void* recv_buffer);

// Number of result elements on this rank (at `recv`, the call's receive pointer) that differ
// from the expected values.
size_t count_wrong(OpKind kind, const CaseShape& shape, const BenchParams& params, int rank,
                   int world_size, const void* recv);

}  // namespace weft::bench
