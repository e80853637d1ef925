// bench/serialization: the seed's user records and fp32 tensors (dense and sparse) encoded and
// decoded by each format of format.h. Every benchmark first checks one round trip bit for bit
// (outside the timed loop) and reports "fails round trip: ..." instead of a figure when it
// differs. Rates count the bytes of the encoded form (as we read the seed's figures); the counter
// wire_bytes is its size. bench/serialization/run.sh runs it and prints the README's table.
//
//   weft_serialization_bench [--records=N] [--max-bytes=B] [benchmark flags]
//     --records    records in the records workload (default 1000000)
//     --max-bytes  largest dense tensor (default 64 MiB; the sizes are 4 KiB, 64 KiB, 1 MiB,
//                  16 MiB and 64 MiB)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "format.h"

namespace weft::bench {
namespace {

struct Options {
  size_t records = 1'000'000;
  size_t max_bytes = size_t{64} << 20;
};
// JSON carries each float as ~20 bytes of text and its DOM as a node: past this it takes
// seconds per call and the run would not fit its few minutes.
constexpr size_t kJsonMaxBytes = size_t{16} << 20;

enum class Direction { encode, decode };

template <typename T>
void copy_metadata(const T& from, T& to) {
  if constexpr (!std::is_same_v<T, Records>) {
    to.name = from.name;
    to.dtype = from.dtype;
    to.shape = from.shape;
  }
}

template <typename T>
void run(benchmark::State& state, const Format& format, const CoderFactory<T>& factory,
         const T& data, Direction direction) {
  auto fail = [&](const std::string& why) {
    state.SkipWithError(("fails round trip: " + why).c_str());
  };
  std::unique_ptr<Coder<T>> coder = factory();
  std::string_view wire;
  if (std::string failed = coder->encode(data, wire); !failed.empty()) {
    return fail("encode: " + failed);
  }
  std::string padded(wire.size() + kWirePadding, '\0');
  padded.replace(0, wire.size(), wire);
  const std::string_view input(padded.data(), wire.size());
  T back{};
  if (std::string failed = coder->decode(input, back); !failed.empty()) {
    return fail("decode: " + failed);
  }
  if (!format.carries_metadata) copy_metadata(data, back);
  if (std::string diff = compare(data, back); !diff.empty()) return fail(diff);

  if (direction == Direction::encode) {
    for (auto _ : state) {
      benchmark::DoNotOptimize(coder->encode(data, wire));
      benchmark::DoNotOptimize(wire.data());
      benchmark::ClobberMemory();
    }
  } else {
    for (auto _ : state) {
      benchmark::DoNotOptimize(coder->decode(input, back));
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(input.size()));
  state.counters["wire_bytes"] = static_cast<double>(input.size());
}

template <typename T>
void add(const Format& format, const CoderFactory<T>& factory, const std::string& workload,
         std::shared_ptr<const T> data) {
  if (!factory) return;
  for (Direction d : {Direction::encode, Direction::decode}) {
    if (d == Direction::encode && !format.encode_timed) continue;
    std::string name =
        format.name + "/" + workload + (d == Direction::encode ? "/encode" : "/decode");
    benchmark::RegisterBenchmark(
        name.c_str(), [=](benchmark::State& state) { run(state, format, factory, *data, d); });
  }
}

void register_all(const Options& o) {
  const Format formats[] = {protobuf_format(),      protobuf_repeated_float_format(),
                            flatbuffers_format(),   avro_format(),
                            nlohmann_json_format(), rapidjson_format(),
                            simdjson_format(),      weft_frame_format()};
  auto records = std::make_shared<const Records>(make_records(o.records));
  std::string records_name = "records/" + std::to_string(o.records);
  for (const Format& f : formats) add(f, f.records, records_name, records);
  for (size_t bytes :
       {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20}) {
    if (bytes > o.max_bytes) break;
    auto tensor = std::make_shared<const Tensor>(make_tensor(bytes, Values::finite));
    auto sparse = std::make_shared<const SparseTensor>(make_sparse(bytes, Values::finite));
    for (const Format& f : formats) {
      if (f.name.starts_with("json") && bytes > kJsonMaxBytes) continue;
      add(f, f.tensor, "tensor/" + std::to_string(bytes), tensor);
      add(f, f.sparse, "sparse/" + std::to_string(bytes), sparse);
    }
  }
  // NaN (with a payload), +Inf and -Inf among the values: which formats carry them bit for bit.
  constexpr size_t kNonfiniteBytes = 4096;
  auto tensor =
      std::make_shared<const Tensor>(make_tensor(kNonfiniteBytes, Values::with_nonfinite));
  auto sparse =
      std::make_shared<const SparseTensor>(make_sparse(kNonfiniteBytes, Values::with_nonfinite));
  for (const Format& f : formats) {
    add(f, f.tensor, "tensor_nonfinite/" + std::to_string(kNonfiniteBytes), tensor);
    add(f, f.sparse, "sparse_nonfinite/" + std::to_string(kNonfiniteBytes), sparse);
  }
}

// Reads our flags from what benchmark::Initialize left; false (and a message) on anything else.
bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](std::string_view flag, size_t& out) {
      if (!arg.starts_with(flag)) return false;
      char* end = nullptr;
      out = std::strtoull(arg.data() + flag.size(), &end, 10);
      return *end == '\0' && out > 0;
    };
    if (!value("--records=", o.records) && !value("--max-bytes=", o.max_bytes)) {
      std::fprintf(stderr, "weft_serialization_bench: unknown or bad argument '%s'\n", argv[i]);
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  weft::bench::Options options;
  if (!weft::bench::parse(argc, argv, options)) return 2;
  weft::bench::register_all(options);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
