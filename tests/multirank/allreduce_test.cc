// allreduce: every algorithm x transport x world size 1..8 x in place / out of place, with every
// dtype x op at counts 0, 1, 7 and the representative pairs (data.h) at 1023, against a reference
// computed here; plus large odd counts with small chunks for the pipelined ring and
// halving-doubling, and the automatic selector.
#include <gtest/gtest.h>

#include "multirank/data.h"
#include "multirank/harness.h"

namespace weft::harness {
namespace {

struct ReduceCase {
  DataType dtype;
  ReduceOp op;
  size_t count;
  bool in_place;
};

std::string describe(const ReduceCase& c, int rank) {
  return fmt::format("rank {} {} {} count {} {}", rank, to_string(c.dtype), to_string(c.op),
                     c.count, c.in_place ? "in place" : "out of place");
}

// Inputs of every rank and the expected result, computed once per case (not once per rank).
struct Prepared {
  std::vector<std::vector<std::byte>> inputs;
  std::vector<double> expected;
};

Prepared prepare(const ReduceCase& c, int n) {
  Prepared p;
  for (int r = 0; r < n; ++r) {
    p.inputs.push_back(make_buffer(c.dtype, c.count, [&](size_t i) {
      return input_value(r, i, c.dtype, c.op);
    }));
  }
  p.expected.resize(c.count);
  for (size_t i = 0; i < c.count; ++i) {
    p.expected[i] = reference(c.dtype, c.op, n, [&](int r) {
      return load(c.dtype, p.inputs[static_cast<size_t>(r)].data(), i);
    });
  }
  return p;
}

// Runs `cases` in order on every rank of `g` and checks each rank's result.
void run_allreduce_cases(RankGroup& g, const Options& options,
                         const std::vector<ReduceCase>& cases, Failures& failures) {
  const int n = g.size();
  std::vector<Prepared> prepared;
  for (const ReduceCase& c : cases) prepared.push_back(prepare(c, n));
  g.run([&](int rank) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const ReduceCase& c = cases[k];
      const std::vector<std::byte>& input = prepared[k].inputs[static_cast<size_t>(rank)];
      std::vector<std::byte> send = input;
      std::vector<std::byte> recv = c.in_place ? input : std::vector<std::byte>(input.size(), kSentinel);
      CollectiveArgs a;
      a.kind = OpKind::allreduce;
      a.dtype = c.dtype;
      a.op = c.op;
      a.count = c.count;
      a.send = c.in_place ? recv.data() : send.data();
      a.recv = recv.data();
      const Status s = g.collective(rank, a, options);
      if (!s.ok()) {
        failures.add(describe(c, rank) + ": " + s.to_string());
        return;  // the transport is broken now; later cases would only repeat this
      }
      std::string diff = compare(c.dtype, recv.data(), c.count,
                                 [&](size_t i) { return prepared[k].expected[i]; });
      if (!diff.empty()) failures.add(describe(c, rank) + ": " + diff);
      if (!c.in_place && send != input) failures.add(describe(c, rank) + ": send buffer changed");
    }
  });
}

class AllreduceSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(AllreduceSweep, EveryDtypeOpCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::allreduce, p.algorithm);
  std::vector<ReduceCase> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
    for (DataType t : all_dtypes()) {
      for (ReduceOp op : ops_for(t)) {
        if (count > 100 && !representative(t, op)) continue;
        for (bool in_place : {false, true}) cases.push_back({t, op, count, in_place});
      }
    }
  }
  Failures failures;
  run_allreduce_cases(g, options, cases, failures);
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(
    Allreduce, AllreduceSweep,
    ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::ring, Algorithm::recursive_doubling,
                                            Algorithm::halving_doubling, Algorithm::direct,
                                            Algorithm::shm_direct})),
    sweep_name);

// Large odd counts: many chunks per block, blocks of unequal size, pipelining across steps.
class AllreduceLarge : public ::testing::TestWithParam<SweepParam> {};

TEST_P(AllreduceLarge, OddCountSmallChunks) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::allreduce, p.algorithm);
  options.chunk_bytes = 16 * 1024;
  const std::vector<ReduceCase> cases = {{DataType::fp32, ReduceOp::sum, 300001, false},
                                         {DataType::fp32, ReduceOp::sum, 300001, true},
                                         {DataType::bf16, ReduceOp::avg, 100003, false},
                                         {DataType::int32, ReduceOp::max, 100003, true}};
  Failures failures;
  run_allreduce_cases(g, options, cases, failures);
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Allreduce, AllreduceLarge,
                         ::testing::ValuesIn(sweep({2, 3, 5, 8}, {Algorithm::ring,
                                                                  Algorithm::halving_doubling})),
                         sweep_name);

// The default chunk size and the automatic selector over the size thresholds.
TEST(AllreduceAutomatic, SelectorAcrossSizes) {
  for (const auto& t : transport_names()) {
    for (int n : {3, 4, 7}) {
      SCOPED_TRACE(fmt::format("{} n={}", t, n));
      RankGroup g(transport_factory(t), n);
      const Options options = harness_options();
      std::vector<ReduceCase> cases;
      for (size_t count : {size_t{3}, size_t{2000}, size_t{30001}, size_t{200001}}) {
        cases.push_back({DataType::fp32, ReduceOp::sum, count, false});
        cases.push_back({DataType::int64, ReduceOp::min, count, true});
      }
      Failures failures;
      run_allreduce_cases(g, options, cases, failures);
      failures.expect_none();
    }
  }
}

}  // namespace
}  // namespace weft::harness
