// reduce_scatter: every algorithm x transport x world size x placement, with every dtype x op at
// counts 0, 1, 7 and the representative pairs at 513 per rank; a large odd count with small
// chunks; and the selector.
#include <gtest/gtest.h>

#include "multirank/data.h"
#include "multirank/harness.h"

namespace weft::harness {
namespace {

struct Case {
  DataType dtype;
  ReduceOp op;
  size_t count;  // per rank
  bool in_place;
};

struct Prepared {
  std::vector<std::vector<std::byte>> inputs;  // n * count elements per rank
  std::vector<double> expected;                // n * count: block r is rank r's result
};

Prepared prepare(const Case& c, int n) {
  Prepared p;
  const size_t total = static_cast<size_t>(n) * c.count;
  for (int r = 0; r < n; ++r) {
    p.inputs.push_back(
        make_buffer(c.dtype, total, [&](size_t i) { return input_value(r, i, c.dtype, c.op); }));
  }
  p.expected.resize(total);
  for (size_t i = 0; i < total; ++i) {
    p.expected[i] = reference(c.dtype, c.op, n, [&](int r) {
      return load(c.dtype, p.inputs[static_cast<size_t>(r)].data(), i);
    });
  }
  return p;
}

void run_cases(RankGroup& g, const Options& options, const std::vector<Case>& cases,
               Failures& failures) {
  const int n = g.size();
  std::vector<Prepared> prepared;
  for (const Case& c : cases) prepared.push_back(prepare(c, n));
  g.run([&](int rank) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const size_t es = dtype_size(c.dtype);
      const size_t block = c.count * es;
      const std::vector<std::byte>& input = prepared[k].inputs[static_cast<size_t>(rank)];
      std::vector<std::byte> send = input;
      std::vector<std::byte> out(block, kSentinel);
      CollectiveArgs a;
      a.kind = OpKind::reduce_scatter;
      a.dtype = c.dtype;
      a.op = c.op;
      a.count = c.count;
      a.send = send.data();
      a.recv = c.in_place ? send.data() + static_cast<size_t>(rank) * block : out.data();
      const std::string what = fmt::format("rank {} {} {} count {} {}", rank, to_string(c.dtype),
                                           to_string(c.op), c.count,
                                           c.in_place ? "in place" : "out of place");
      const Status s = g.collective(rank, a, options);
      if (!s.ok()) {
        failures.add(what + ": " + s.to_string());
        return;
      }
      const size_t first = static_cast<size_t>(rank) * c.count;
      std::string diff = compare(c.dtype, a.recv, c.count,
                                 [&](size_t i) { return prepared[k].expected[first + i]; });
      if (!diff.empty()) failures.add(what + ": " + diff);
      // The rest of the input is not the collective's to change.
      for (size_t b = 0; b < static_cast<size_t>(n); ++b) {
        if (c.in_place && b == static_cast<size_t>(rank)) continue;
        if (!std::equal(send.begin() + static_cast<long>(b * block),
                        send.begin() + static_cast<long>((b + 1) * block),
                        input.begin() + static_cast<long>(b * block))) {
          failures.add(fmt::format("{}: input block {} changed", what, b));
        }
      }
    }
  });
}

class ReduceScatterSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(ReduceScatterSweep, EveryDtypeOpCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::reduce_scatter, p.algorithm);
  std::vector<Case> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{513}}) {
    for (DataType t : all_dtypes()) {
      for (ReduceOp op : ops_for(t)) {
        if (count > 100 && !representative(t, op)) continue;
        for (bool in_place : {false, true}) cases.push_back({t, op, count, in_place});
      }
    }
  }
  Failures failures;
  run_cases(g, options, cases, failures);
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(ReduceScatter, ReduceScatterSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::ring,
                                                                 Algorithm::halving_doubling,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct})),
                         sweep_name);

class ReduceScatterLarge : public ::testing::TestWithParam<SweepParam> {};

TEST_P(ReduceScatterLarge, OddCountSmallChunks) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::reduce_scatter, p.algorithm);
  options.chunk_bytes = 16 * 1024;
  const std::vector<Case> cases = {{DataType::fp32, ReduceOp::sum, 60001, false},
                                   {DataType::fp16, ReduceOp::avg, 30001, true}};
  Failures failures;
  run_cases(g, options, cases, failures);
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(ReduceScatter, ReduceScatterLarge,
                         ::testing::ValuesIn(sweep({3, 8}, {Algorithm::ring,
                                                            Algorithm::halving_doubling})),
                         sweep_name);

TEST(ReduceScatterAutomatic, SelectorAcrossSizes) {
  for (int n : {3, 4}) {
    RankGroup g(transport_factory("local"), n);
    const Options options = harness_options();
    std::vector<Case> cases;
    for (size_t count : {size_t{5}, size_t{3000}, size_t{70001}}) {
      cases.push_back({DataType::fp32, ReduceOp::sum, count, false});
      cases.push_back({DataType::int32, ReduceOp::max, count, true});
    }
    Failures failures;
    run_cases(g, options, cases, failures);
    failures.expect_none();
  }
}

}  // namespace
}  // namespace weft::harness
