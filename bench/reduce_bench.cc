// Reduction kernel throughput against memcpy of the same number of bytes.
//
// bytes_per_second counts the size of one buffer per iteration for every benchmark, so the
// figures compare directly: reduce_into(dst, src) reads two buffers and writes one (3 streams),
// memcpy reads one and writes one (2 streams). The second argument picks the kernel table
// (0 generic, 1 avx2, 2 avx512; skipped when the CPU lacks it). Buffers are touched before timing.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "reduce/kernel_table.h"
#include "reduce/reduce.h"

namespace weft {
namespace {

using reduce_detail::Isa;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;

// A 64-byte aligned buffer filled with `count` copies of the 1.0 pattern of `dtype`.
Buffer make_buffer(size_t bytes, DataType dtype) {
  Buffer b(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  const size_t es = dtype_size(dtype);
  for (size_t i = 0; i + es <= bytes; i += es) {
    if (dtype == DataType::fp32) {
      const float one = 1.0f;
      std::memcpy(b.get() + i, &one, es);
    } else {
      const uint16_t one = dtype == DataType::bf16 ? float_to_bf16(1.0f) : float_to_half(1.0f);
      std::memcpy(b.get() + i, &one, es);
    }
  }
  return b;
}

void BM_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  Buffer src = make_buffer(bytes, DataType::fp32), dst = make_buffer(bytes, DataType::fp32);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void reduce_sum(benchmark::State& state, DataType dtype) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const auto isa = static_cast<Isa>(state.range(1));
  const Isa saved = reduce_detail::active_isa();
  if (!reduce_detail::force_isa(isa)) {
    state.SkipWithError("kernel table not supported by this CPU");
    return;
  }
  state.SetLabel(reduce_detail::to_string(isa));
  Buffer src = make_buffer(bytes, dtype), dst = make_buffer(bytes, dtype);
  const size_t count = bytes / dtype_size(dtype);
  for (auto _ : state) {
    reduce_into(dst.get(), src.get(), count, dtype, ReduceOp::sum);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  (void)reduce_detail::force_isa(saved);
}

void BM_reduce_f32_sum(benchmark::State& state) { reduce_sum(state, DataType::fp32); }
void BM_reduce_bf16_sum(benchmark::State& state) { reduce_sum(state, DataType::bf16); }
void BM_reduce_f16_sum(benchmark::State& state) { reduce_sum(state, DataType::fp16); }

constexpr int64_t kMinBytes = 64 << 10;
constexpr int64_t kMaxBytes = 64 << 20;

BENCHMARK(BM_memcpy)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_reduce_f32_sum)
    ->ArgsProduct({benchmark::CreateRange(kMinBytes, kMaxBytes, 4), {0, 1, 2}});
BENCHMARK(BM_reduce_bf16_sum)
    ->ArgsProduct({benchmark::CreateRange(kMinBytes, kMaxBytes, 4), {0, 1, 2}});
BENCHMARK(BM_reduce_f16_sum)
    ->ArgsProduct({benchmark::CreateRange(kMinBytes, kMaxBytes, 4), {0, 1, 2}});

}  // namespace
}  // namespace weft
