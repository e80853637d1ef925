// `weft bench`: nccl-tests style sweep of one collective (or all) over message sizes, run under
// the launcher:  weft run -n 4 weft bench allreduce -b 8 -e 64M -f 4 --check
// Only rank 0 prints. Per-collective helpers live in tools/bench/.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/bench/bench_case.h"
#include "tools/bench/bench_data.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/sizes.h"
#include "tools/commands.h"
#include "weft/communicator.h"

namespace weft::tools {

namespace {

using bench::BenchParams;
using bench::BenchRow;
using bench::CaseShape;
using bench::Measurement;

struct BenchArgs {
  std::string collective;
  std::string min_size = "8";
  std::string max_size = "32M";
  size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  std::string dtype = "f32";
  std::string op = "sum";
  int root = 0;
  std::string algorithm;
  bool check = false;
  bool async = false;
  std::string json_path;
};

// Everything resolved from the command line, before a communicator exists.
struct BenchPlan {
  std::vector<OpKind> kinds;
  std::vector<size_t> sizes;
  BenchParams params;
  Options base;
};

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, AlignedFree>;

// Page-aligned and touched once, so timing never includes page faults.
Buffer allocate(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  Buffer b(std::aligned_alloc(4096, rounded));
  if (b) std::memset(b.get(), 0, rounded);
  return b;
}

Result<BenchPlan> make_plan(const BenchArgs& a) {
  auto invalid = [](const std::string& what) { return Status(ErrorCode::invalid_argument, what); };
  BenchPlan plan;
  if (a.collective == "all") {
    auto kinds = bench::benchmarked_kinds();
    plan.kinds.assign(kinds.begin(), kinds.end());
  } else {
    auto kind = parse_op_kind(a.collective);
    bool known = false;
    for (OpKind k : bench::benchmarked_kinds()) known = known || (kind && *kind == k);
    if (!known) return invalid("unknown collective '" + a.collective + "' (try 'all')");
    plan.kinds = {*kind};
  }
  auto dtype = parse_dtype(a.dtype);
  if (!dtype) return invalid("unknown data type '" + a.dtype + "'");
  auto op = parse_reduce_op(a.op);
  if (!op) return invalid("unknown reduction '" + a.op + "'");
  plan.params = {*dtype, *op, a.root, a.async};
  auto min = bench::parse_size(a.min_size);
  if (!min.ok()) return min.status();
  auto max = bench::parse_size(a.max_size);
  if (!max.ok()) return max.status();
  if (min.value() == 0 || max.value() < min.value()) {
    return invalid("sizes must satisfy 0 < MIN <= MAX");
  }
  plan.sizes = bench::size_sweep(min.value(), max.value(), a.factor);
  if (!a.algorithm.empty()) {
    auto algo = parse_algorithm(a.algorithm);
    if (!algo) return invalid("unknown algorithm '" + a.algorithm + "'");
    bool any = false;
    for (OpKind k : plan.kinds) {
      if (!algorithm_supports(*algo, k)) continue;
      plan.base.set_algorithm(k, *algo);
      any = true;
    }
    if (!any)
      return invalid("algorithm '" + a.algorithm + "' implements none of these collectives");
  }
  return plan;
}

class BenchRunner {
 public:
  BenchRunner(Communicator& comm, const BenchArgs& args, const BenchPlan& plan)
      : comm_(comm), args_(args), plan_(plan) {}

  Status run(std::vector<BenchRow>& rows);

 private:
  Result<Measurement> measure(OpKind kind, const CaseShape& shape, bool in_place);
  Result<double> max_over_ranks(double local);
  Result<size_t> sum_over_ranks(size_t local);
  void print(const std::string& text) {
    if (comm_.rank() != 0) return;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  Communicator& comm_;
  const BenchArgs& args_;
  const BenchPlan& plan_;
  Buffer send_;
  Buffer recv_;
};

Result<double> BenchRunner::max_over_ranks(double local) {
  double out = 0;
  WEFT_RETURN_IF_ERROR(comm_.allreduce(&local, &out, 1, DataType::fp64, ReduceOp::max));
  return out;
}

Result<size_t> BenchRunner::sum_over_ranks(size_t local) {
  int64_t in = static_cast<int64_t>(local), out = 0;
  WEFT_RETURN_IF_ERROR(comm_.allreduce(&in, &out, 1, DataType::int64, ReduceOp::sum));
  return static_cast<size_t>(out);
}

Result<Measurement> BenchRunner::measure(OpKind kind, const CaseShape& shape, bool in_place) {
  const int rank = comm_.rank(), n = comm_.size();
  const BenchParams& p = plan_.params;
  const bench::CallBuffers buffers =
      bench::place_buffers(kind, shape, p, rank, send_.get(), recv_.get(), in_place);
  auto call = [&] { return bench::run_collective(comm_, kind, shape, p, buffers); };
  bench::fill_inputs(kind, shape, p, rank, n, buffers, recv_.get());
  for (int i = 0; i < args_.warmup; ++i) WEFT_RETURN_IF_ERROR(call());
  WEFT_RETURN_IF_ERROR(comm_.barrier());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < args_.iters; ++i) WEFT_RETURN_IF_ERROR(call());
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;

  Measurement m;
  auto time = max_over_ranks(elapsed.count() / args_.iters);
  if (!time.ok()) return time.status();
  m.time_us = time.value();
  bench::derive_bandwidth(m, shape.bytes, bench::bus_factor(kind, n));
  if (args_.check && kind != OpKind::barrier) {
    bench::fill_inputs(kind, shape, p, rank, n, buffers, recv_.get());
    WEFT_RETURN_IF_ERROR(call());
    auto wrong = sum_over_ranks(bench::count_wrong(kind, shape, p, rank, n, buffers.recv));
    if (!wrong.ok()) return wrong.status();
    m.wrong = wrong.value();
  }
  return m;
}

Status BenchRunner::run(std::vector<BenchRow>& rows) {
  const int n = comm_.size();
  size_t max_bytes = 0;
  for (OpKind k : plan_.kinds) {
    max_bytes =
        std::max(max_bytes, bench::shape_for(k, plan_.sizes.back(), plan_.params.dtype, n).bytes);
  }
  send_ = allocate(max_bytes);
  recv_ = allocate(max_bytes);
  if (!send_ || !recv_) {
    return Status(ErrorCode::invalid_argument,
                  "cannot allocate two buffers of " + std::to_string(max_bytes) + " bytes");
  }
  // How rank 0 reaches its peers ("shm", "tcp", "mixed (shm to ranks 1, tcp to the others)").
  const auto record = nlohmann::json::parse(comm_.flight_record_json(), nullptr, false);
  const std::string transport =
      record.is_object() ? record.value("transport", std::string("?")) : std::string("?");
  print("# weft bench: world size " + std::to_string(n) + ", " + std::to_string(args_.iters) +
        " iterations after " + std::to_string(args_.warmup) + " warm-up, check " +
        (args_.check ? "on" : "off") +
        (args_.async ? ", each call *_async then wait()" : ", blocking calls") + "\n# options: " + comm_.options().describe() +
        "\n# transport: " + transport + "\n");
  for (OpKind kind : plan_.kinds) {
    print(bench::table_header(kind, to_string(comm_.options().algorithm(kind))));
    std::vector<BenchRow> section;
    size_t last_bytes = SIZE_MAX;
    for (size_t requested : plan_.sizes) {
      BenchRow row;
      row.kind = kind;
      row.shape = bench::shape_for(kind, requested, plan_.params.dtype, n);
      row.params = plan_.params;
      if (row.shape.bytes == last_bytes) continue;  // small sizes rounded up to the same shape
      last_bytes = row.shape.bytes;
      for (bool in_place : {false, true}) {
        if (!(in_place ? bench::has_in_place(kind) : bench::has_out_of_place(kind))) continue;
        auto m = measure(kind, row.shape, in_place);
        if (!m.ok()) {
          return m.status().with_context(std::string(to_string(kind)) + " of " +
                                         std::to_string(row.shape.bytes) + " bytes");
        }
        (in_place ? row.in_place : row.out_of_place) = m.value();
      }
      print(bench::table_row(row));
      section.push_back(row);
      if (kind == OpKind::barrier) break;  // one size is enough
    }
    print(bench::table_footer(section));
    rows.insert(rows.end(), section.begin(), section.end());
  }
  // Shared memory with single-copy reads on: how many of rank 0's receives used them.
  if (comm_.rank() != 0 || comm_.options().shm_cma_threshold == 0) return Status::success();
  const auto after = nlohmann::json::parse(comm_.flight_record_json(), nullptr, false);
  if (after.is_object() && after.contains("transport_counters")) {
    const auto& c = after["transport_counters"];
    print(fmt::format("# shm single copy (rank 0): {} messages, {} bytes read from the senders' "
                      "memory; {} peers refused it\n",
                      c.value("shm_single_copy_messages", uint64_t{0}),
                      c.value("shm_single_copy_bytes", uint64_t{0}),
                      c.value("shm_single_copy_refused_peers", uint64_t{0})));
  }
  return Status::success();
}

int run_bench(const BenchArgs& args) {
  auto plan = make_plan(args);
  if (!plan.ok()) {
    std::fprintf(stderr, "weft bench: %s\n", plan.status().message().c_str());
    return 2;
  }
  auto comm = Communicator::from_env(plan.value().base);
  if (!comm.ok()) {
    std::fprintf(stderr,
                 "weft bench: cannot create the communicator (run under `weft run -n N`): %s\n",
                 comm.status().to_string().c_str());
    return 1;
  }
  std::vector<BenchRow> rows;
  BenchRunner runner(*comm.value(), args, plan.value());
  Status st = runner.run(rows);
  if (!st.ok()) {
    std::fprintf(stderr, "weft bench: rank %d: %s\n", comm.value()->rank(), st.to_string().c_str());
    comm.value()->abort("weft bench failed");
    return 1;
  }
  bool wrong = false;
  for (const auto& r : rows) {
    for (const auto* m : {&r.out_of_place, &r.in_place})
      wrong = wrong || (*m && (*m)->wrong.value_or(0) > 0);
  }
  if (comm.value()->rank() == 0 && !args.json_path.empty()) {
    std::ofstream out(args.json_path);
    out << bench::rows_json(rows, comm.value()->size(), comm.value()->options().describe());
    if (!out) {
      std::fprintf(stderr, "weft bench: cannot write %s\n", args.json_path.c_str());
      return 1;
    }
  }
  st = comm.value()->shutdown();
  if (!st.ok()) std::fprintf(stderr, "weft bench: shutdown: %s\n", st.to_string().c_str());
  return wrong ? 3 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "bench", "Measure a collective over a range of sizes (run it under `weft run -n N`)");
  auto args = std::make_shared<BenchArgs>();
  cmd->add_option("collective", args->collective,
                  "allreduce, broadcast, reduce, allgather, reduce_scatter, gather, scatter, "
                  "alltoall, barrier, or all")
      ->required();
  cmd->add_option("-b,--minbytes", args->min_size, "Smallest size (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", args->max_size, "Largest size (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", args->factor, "Multiply the size by this each step")
      ->capture_default_str()
      ->check(CLI::Range(size_t{2}, size_t{1} << 20));
  cmd->add_option("-n,--iters", args->iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("-w,--warmup_iters", args->warmup, "Untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-d,--datatype", args->dtype, "Element type: f32, f16, bf16, f64, i8, ...")
      ->capture_default_str();
  cmd->add_option("-o,--op", args->op, "Reduction: sum, prod, min, max, avg")
      ->capture_default_str();
  cmd->add_option("-r,--root", args->root, "Root rank of rooted collectives")
      ->capture_default_str();
  cmd->add_option("-a,--algorithm", args->algorithm,
                  "Force an algorithm (ring, recursive_doubling, ...) where it applies");
  cmd->add_flag("-c,--check", args->check, "Verify results; count wrong elements");
  cmd->add_flag("--async", args->async,
                "Call the *_async form and wait() on its Work (the path torch calls take)");
  cmd->add_option("--json", args->json_path, "Also write the rows to this JSON file (rank 0)");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace weft::tools
