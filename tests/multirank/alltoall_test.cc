// alltoall and alltoallv: every algorithm x transport x world size x dtype x count x placement;
// alltoallv with uneven (and zero) counts, gaps and blocks out of rank order.
#include <gtest/gtest.h>

#include <numeric>

#include "multirank/data.h"
#include "multirank/harness.h"

namespace weft::harness {
namespace {

// Element i of the block rank `from` sends to rank `to`.
double value(int from, int to, size_t i) {
  return static_cast<double>((from * 31 + to * 7 + i * 3) % 127);
}

class AlltoallSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(AlltoallSweep, EveryDtypeCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::alltoall, p.algorithm);
  const size_t n = static_cast<size_t>(p.n);
  Failures failures;
  g.run([&](int rank) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
      for (DataType t : {DataType::uint8, DataType::bf16, DataType::fp32, DataType::int64}) {
        for (bool in_place : {false, true}) {
          const size_t es = dtype_size(t);
          const std::vector<std::byte> input = make_buffer(t, n * count, [&](size_t i) {
            return value(rank, static_cast<int>(i / count), i % count);
          });
          std::vector<std::byte> send = input;
          std::vector<std::byte> recv(n * count * es, kSentinel);
          CollectiveArgs a;
          a.kind = OpKind::alltoall;
          a.dtype = t;
          a.count = count;
          a.send = in_place ? recv.data() : send.data();
          a.recv = recv.data();
          if (in_place) recv = input;
          const std::string what = fmt::format("rank {} {} count {} {}", rank, to_string(t),
                                               count, in_place ? "in place" : "out of place");
          const Status s = g.collective(rank, a, options);
          if (!s.ok()) return failures.add(what + ": " + s.to_string());
          std::string diff = compare(t, recv.data(), n * count, [&](size_t i) {
            return representable(t, value(static_cast<int>(i / count), rank, i % count));
          });
          if (!diff.empty()) failures.add(what + ": " + diff);
          if (!in_place && send != input) failures.add(what + ": send buffer changed");
        }
      }
    }
  });
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Alltoall, AlltoallSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::pairwise,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct})),
                         sweep_name);

// Elements rank `from` sends to rank `to`: uneven, some zero.
size_t vcount(int from, int to, size_t scale) {
  return static_cast<size_t>((from * 3 + to * 5 + 1) % 4) * scale;
}

struct VLayout {
  std::vector<size_t> counts, displs;
  size_t extent = 0;
};

// Blocks in reverse peer order, with a one-element gap before each.
VLayout layout(const std::vector<size_t>& counts) {
  VLayout l;
  l.counts = counts;
  l.displs.resize(counts.size());
  size_t at = 0;
  for (size_t j = counts.size(); j-- > 0;) {
    at += 1;
    l.displs[j] = at;
    at += counts[j];
  }
  l.extent = at + 1;
  return l;
}

class AlltoallvSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(AlltoallvSweep, UnevenCountsGapsAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::alltoallv, p.algorithm);
  Failures failures;
  g.run([&](int rank) {
    for (size_t scale : {size_t{0}, size_t{1}, size_t{301}}) {
      for (DataType t : {DataType::int8, DataType::fp16, DataType::fp64}) {
        for (bool in_place : {false, true}) {
          const size_t es = dtype_size(t);
          std::vector<size_t> sc, rc;
          for (int j = 0; j < p.n; ++j) {
            sc.push_back(vcount(rank, j, scale));
            rc.push_back(vcount(j, rank, scale));
          }
          const VLayout sl = layout(sc), rl = layout(rc);
          std::vector<std::byte> input(sl.extent * es, kSentinel);
          for (int j = 0; j < p.n; ++j) {
            for (size_t i = 0; i < sc[static_cast<size_t>(j)]; ++i) {
              store(t, input.data(), sl.displs[static_cast<size_t>(j)] + i, value(rank, j, i));
            }
          }
          std::vector<std::byte> send = input;
          std::vector<std::byte> recv(std::max(rl.extent, sl.extent) * es, kSentinel);
          if (in_place) std::copy(input.begin(), input.end(), recv.begin());
          CollectiveArgs a;
          a.kind = OpKind::alltoallv;
          a.dtype = t;
          a.send_counts = sl.counts;
          a.send_displs = sl.displs;
          a.recv_counts = rl.counts;
          a.recv_displs = rl.displs;
          a.send = in_place ? recv.data() : send.data();
          a.recv = recv.data();
          const std::string what = fmt::format("rank {} {} scale {} {}", rank, to_string(t),
                                               scale, in_place ? "in place" : "out of place");
          const Status s = g.collective(rank, a, options);
          if (!s.ok()) return failures.add(what + ": " + s.to_string());
          std::vector<bool> covered(recv.size() / es, false);
          for (int j = 0; j < p.n; ++j) {
            const size_t at = rl.displs[static_cast<size_t>(j)];
            std::string diff = compare(t, recv.data() + at * es, rc[static_cast<size_t>(j)],
                                       [&](size_t i) { return representable(t, value(j, rank, i)); });
            if (!diff.empty()) failures.add(fmt::format("{}: from rank {}: {}", what, j, diff));
            for (size_t i = 0; i < rc[static_cast<size_t>(j)]; ++i) covered[at + i] = true;
          }
          if (!in_place) {
            for (size_t e = 0; e < covered.size(); ++e) {
              if (!covered[e] && recv[e * es] != kSentinel) {
                failures.add(fmt::format("{}: gap element {} written", what, e));
                break;
              }
            }
            if (send != input) failures.add(what + ": send buffer changed");
          }
        }
      }
    }
  });
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Alltoallv, AlltoallvSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::pairwise,
                                                                 Algorithm::direct})),
                         sweep_name);

}  // namespace
}  // namespace weft::harness
