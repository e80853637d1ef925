// Cost of the flight recorder per operation: what a collective pays for being recorded (add at
// submit, mark_running, mark_ended), and the cost of a JSON snapshot of a full ring (only on
// failure or on demand). Compare the first with the 8-byte allreduce latency of `weft bench`
// (10-20 us over TCP on this VM, bench/compare.sh).
#include <benchmark/benchmark.h>

#include "core/flight_recorder.h"

namespace weft {
namespace {

void BM_RecordOneOperation(benchmark::State& state) {
  FlightRecorder r(1024);
  uint64_t seq = 0;
  for (auto _ : state) {
    FlightEntry e;  // what submit() fills in
    e.kind = OpKind::allreduce;
    e.dtype = DataType::fp32;
    e.count = 2;
    e.seq = ++seq;
    e.queued = FlightEntry::Clock::now();
    uint64_t id = r.add(std::move(e));
    r.mark_running(id, e.queued);  // execute() passes the Work's start time
    r.mark_ended(id, Status());
  }
}
BENCHMARK(BM_RecordOneOperation);

void BM_SnapshotOf1024(benchmark::State& state) {
  FlightRecorder r(1024);
  for (int i = 0; i < 2048; ++i) r.mark_ended(r.add(FlightEntry{}), Status());
  for (auto _ : state) benchmark::DoNotOptimize(r.to_json(0, 2));
}
BENCHMARK(BM_SnapshotOf1024);

}  // namespace
}  // namespace weft
