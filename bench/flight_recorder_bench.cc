// Cost of the flight recorder per operation: what a collective pays for being recorded (add at
// submit, mark_running, mark_ended), and the cost of a JSON snapshot of a full ring (only on
// failure or on demand). Compare the first with the 8-byte allreduce latency of `weft bench`
// (about 1 us over shared memory with 2 ranks, 10-20 us over TCP on this VM).
#include <benchmark/benchmark.h>

#include "core/flight_recorder.h"
#include "weft/communicator.h"

namespace weft {
namespace {

// What a collective that runs at submission pays for being recorded: submit() fills an entry
// (recorded as running from the start) and execute() marks it ended. The two clock reads are not
// the recorder's: the communicator takes them for the Work's start and end times anyway, so the
// loop reuses one time point (BM_ClockRead shows what a read costs here).
void BM_RecordOneOperation(benchmark::State& state) {
  FlightRecorder r(1024);
  uint64_t seq = 0;
  const auto now = FlightEntry::Clock::now();
  for (auto _ : state) {
    uint64_t id = r.add_collective(OpKind::allreduce, DataType::fp32, ReduceOp::sum, -1, 2, ++seq,
                                   Algorithm::ring, now, /*running=*/true);
    r.mark_ended(id, Status(), now);
  }
}
BENCHMARK(BM_RecordOneOperation);

// The same through a queued operation: add, mark_running and mark_ended.
void BM_RecordOneQueuedOperation(benchmark::State& state) {
  FlightRecorder r(1024);
  uint64_t seq = 0;
  const auto now = FlightEntry::Clock::now();
  for (auto _ : state) {
    FlightEntry e;
    e.kind = OpKind::allreduce;
    e.seq = ++seq;
    e.queued = now;
    uint64_t id = r.add(std::move(e));
    r.mark_running(id, now);
    r.mark_ended(id, Status(), now);
  }
}
BENCHMARK(BM_RecordOneQueuedOperation);

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(FlightEntry::Clock::now());
}
BENCHMARK(BM_ClockRead);

// The recorder on the real path: a one-rank communicator's 8-byte allreduce (everything but the
// transport) with the recorder off (0) and at its default size (1024). The difference is what
// recording costs an operation; compare it with the 2-rank 8-byte allreduce latency.
void BM_OneRankAllreduce8B(benchmark::State& state) {
  Options o;
  o.rank = 0;
  o.size = 1;
  o.flight_recorder = static_cast<size_t>(state.range(0));
  auto comm = Communicator::create(o, make_memory_store());
  if (!comm.ok()) {
    state.SkipWithError(comm.status().to_string().c_str());
    return;
  }
  float v[2] = {1, 2};
  for (auto _ : state) {
    Status st = comm.value()->allreduce(v, v, 2, DataType::fp32, ReduceOp::sum);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_OneRankAllreduce8B)->Arg(0)->Arg(1024);

void BM_SnapshotOf1024(benchmark::State& state) {
  FlightRecorder r(1024);
  for (int i = 0; i < 2048; ++i) r.mark_ended(r.add(FlightEntry{}), Status());
  for (auto _ : state) benchmark::DoNotOptimize(r.to_json(0, 2));
}
BENCHMARK(BM_SnapshotOf1024);

}  // namespace
}  // namespace weft
