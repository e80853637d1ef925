// The "who is stuck where" report of `weft diag`, computed from the flight records
// (FlightRecorder::to_json) of the ranks of one communicator.
//
// Collectives run in the same order on every rank, so the collective with the lowest sequence
// number that some rank still waits in is the one holding the job up. For it the report names the
// ranks that have not entered it, the ranks waiting in it (and since when), ranks stuck in another
// collective, ranks that did not answer, pending point-to-point operations and failures, e.g.
//   rank 3 has not entered allreduce #812 (f32 x 1024, sum) (ranks 0-2,4-7 waiting in it since 31.2 s)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace weft {

// "0-2,4,6-7" for {0,1,2,4,6,7}; `ranks` sorted ascending.
std::string rank_ranges(const std::vector<int>& ranks);
// "rank 3" or "ranks 0-2,4".
std::string ranks_phrase(const std::vector<int>& ranks);

// records[r]: rank r's flight record, or nullopt if it did not answer. One line per finding;
// never empty (e.g. "no operation in flight; every rank finished allreduce #812").
std::vector<std::string> stuck_report(const std::vector<std::optional<nlohmann::json>>& records);

}  // namespace weft
