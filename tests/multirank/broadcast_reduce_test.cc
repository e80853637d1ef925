// broadcast and reduce: every algorithm x transport x world size x root x dtype (x op) x count x
// placement; large counts with small chunks for the pipelined chains; buffers the collective does
// not define (reduce's recv off the root) stay untouched.
#include <gtest/gtest.h>

#include "multirank/data.h"
#include "multirank/harness.h"

namespace weft::harness {
namespace {

std::vector<int> roots_for(int n) {
  std::vector<int> roots = {0};
  if (n > 2) roots.push_back(n / 2);
  if (n > 1) roots.push_back(n - 1);
  return roots;
}

double bvalue(int root, size_t i) { return static_cast<double>((root * 17 + i * 5) % 97); }

void run_broadcast(RankGroup& g, const Options& options, const std::vector<size_t>& counts,
                   const std::vector<DataType>& dtypes, Failures& failures) {
  const int n = g.size();
  g.run([&](int rank) {
    for (int root : roots_for(n)) {
      for (size_t count : counts) {
        for (DataType t : dtypes) {
          for (bool in_place : {true, false}) {
            const size_t es = dtype_size(t);
            const std::vector<std::byte> data =
                make_buffer(t, count, [&](size_t i) { return bvalue(root, i); });
            std::vector<std::byte> send = data;
            std::vector<std::byte> buf(count * es, kSentinel);
            if (rank == root && in_place) buf = data;
            CollectiveArgs a;
            a.kind = OpKind::broadcast;
            a.dtype = t;
            a.count = count;
            a.root = root;
            a.recv = buf.data();
            a.send = rank == root && !in_place ? send.data() : buf.data();
            const std::string what =
                fmt::format("rank {} root {} {} count {} {}", rank, root, to_string(t), count,
                            in_place ? "in place" : "out of place");
            const Status s = g.collective(rank, a, options);
            if (!s.ok()) return failures.add(what + ": " + s.to_string());
            if (buf != data) {
              failures.add(what + ": " + compare(t, buf.data(), count, [&](size_t i) {
                             return representable(t, bvalue(root, i));
                           }));
            }
            if (send != data) failures.add(what + ": root's send buffer changed");
          }
        }
      }
    }
  });
}

class BroadcastSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(BroadcastSweep, EveryRootDtypeCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::broadcast, p.algorithm);
  options.chunk_bytes = 256;  // the chain pipelines even at count 1023
  Failures failures;
  run_broadcast(g, options, {0, 1, 7, 1023}, all_dtypes(), failures);
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Broadcast, BroadcastSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::binomial,
                                                                 Algorithm::ring,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct})),
                         sweep_name);

TEST(BroadcastLarge, ChainAndTreeSmallChunks) {
  for (const auto& transport : transport_names()) {
    for (Algorithm algo : {Algorithm::ring, Algorithm::binomial, Algorithm::automatic}) {
      SCOPED_TRACE(fmt::format("{} {}", transport, algorithm_name(algo)));
      RankGroup g(transport_factory(transport), 5);
      Options options = harness_options();
      options.set_algorithm(OpKind::broadcast, algo);
      options.chunk_bytes = 16 * 1024;
      Failures failures;
      run_broadcast(g, options, {300001}, {DataType::fp32}, failures);
      failures.expect_none();
    }
  }
}

struct ReduceCase {
  DataType dtype;
  ReduceOp op;
  size_t count;
};

void run_reduce(RankGroup& g, const Options& options, const std::vector<ReduceCase>& cases,
                Failures& failures) {
  const int n = g.size();
  struct Prepared {
    std::vector<std::vector<std::byte>> inputs;
    std::vector<double> expected;
  };
  std::vector<Prepared> prepared;
  for (const ReduceCase& c : cases) {
    Prepared p;
    for (int r = 0; r < n; ++r) {
      p.inputs.push_back(make_buffer(c.dtype, c.count, [&](size_t i) {
        return input_value(r, i, c.dtype, c.op);
      }));
    }
    for (size_t i = 0; i < c.count; ++i) {
      p.expected.push_back(reference(c.dtype, c.op, n, [&](int r) {
        return load(c.dtype, p.inputs[static_cast<size_t>(r)].data(), i);
      }));
    }
    prepared.push_back(std::move(p));
  }
  g.run([&](int rank) {
    for (int root : roots_for(n)) {
      for (size_t k = 0; k < cases.size(); ++k) {
        for (bool in_place : {false, true}) {
          const ReduceCase& c = cases[k];
          const std::vector<std::byte>& input = prepared[k].inputs[static_cast<size_t>(rank)];
          std::vector<std::byte> send = input;
          std::vector<std::byte> recv(input.size(), kSentinel);
          CollectiveArgs a;
          a.kind = OpKind::reduce;
          a.dtype = c.dtype;
          a.op = c.op;
          a.count = c.count;
          a.root = root;
          a.send = send.data();
          a.recv = recv.data();
          if (in_place && rank == root) a.send = a.recv = send.data();
          const std::string what =
              fmt::format("rank {} root {} {} {} count {} {}", rank, root, to_string(c.dtype),
                          to_string(c.op), c.count, in_place ? "in place" : "out of place");
          const Status s = g.collective(rank, a, options);
          if (!s.ok()) return failures.add(what + ": " + s.to_string());
          if (rank == root) {
            std::string diff = compare(c.dtype, a.recv, c.count,
                                       [&](size_t i) { return prepared[k].expected[i]; });
            if (!diff.empty()) failures.add(what + ": " + diff);
          } else if (!untouched(recv)) {
            failures.add(what + ": recv written on a rank that is not the root");
          }
          if (a.send != a.recv && send != input) failures.add(what + ": send buffer changed");
        }
      }
    }
  });
}

class ReduceSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(ReduceSweep, EveryRootDtypeOpCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::reduce, p.algorithm);
  options.chunk_bytes = 256;
  std::vector<ReduceCase> cases;
  for (DataType t : all_dtypes()) {
    for (ReduceOp op : ops_for(t)) cases.push_back({t, op, 7});
  }
  for (size_t count : {size_t{0}, size_t{1}, size_t{1023}}) {
    cases.push_back({DataType::fp32, ReduceOp::sum, count});
    cases.push_back({DataType::int8, ReduceOp::prod, count});
    cases.push_back({DataType::bf16, ReduceOp::avg, count});
    cases.push_back({DataType::uint8, ReduceOp::min, count});
    cases.push_back({DataType::int64, ReduceOp::max, count});
  }
  Failures failures;
  run_reduce(g, options, cases, failures);
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Reduce, ReduceSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::binomial,
                                                                 Algorithm::ring,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct})),
                         sweep_name);

TEST(ReduceLarge, ChainAndTreeSmallChunks) {
  for (const auto& transport : transport_names()) {
    for (Algorithm algo : {Algorithm::ring, Algorithm::binomial}) {
      SCOPED_TRACE(fmt::format("{} {}", transport, algorithm_name(algo)));
      RankGroup g(transport_factory(transport), 5);
      Options options = harness_options();
      options.set_algorithm(OpKind::reduce, algo);
      options.chunk_bytes = 16 * 1024;
      Failures failures;
      run_reduce(g, options, {{DataType::fp32, ReduceOp::sum, 300001}}, failures);
      failures.expect_none();
    }
  }
}

}  // namespace
}  // namespace weft::harness
