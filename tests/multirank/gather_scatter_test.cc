// gather and scatter: every algorithm x transport x world size x root x dtype x count x
// placement. Off the root, the n-block buffer (gather's recv, scatter's send) is not touched.
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

// Element i of rank r's block.
double value(int r, size_t i) { return static_cast<double>((r * 29 + i * 7) % 113); }

const std::vector<DataType>& sizes_of_types() {
  static const std::vector<DataType> v = {DataType::int8, DataType::fp16, DataType::int32,
                                          DataType::fp64};
  return v;
}

class GatherSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(GatherSweep, EveryRootCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::gather, p.algorithm);
  const size_t n = static_cast<size_t>(p.n);
  Failures failures;
  g.run([&](int rank) {
    for (int root : roots_for(p.n)) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
        for (DataType t : sizes_of_types()) {
          for (bool in_place : {false, true}) {
            const size_t es = dtype_size(t), block = count * es;
            const std::vector<std::byte> mine =
                make_buffer(t, count, [&](size_t i) { return value(rank, i); });
            std::vector<std::byte> send = mine;
            std::vector<std::byte> recv(n * block, kSentinel);
            CollectiveArgs a;
            a.kind = OpKind::gather;
            a.dtype = t;
            a.count = count;
            a.root = root;
            a.send = send.data();
            a.recv = recv.data();
            if (in_place && rank == root) {
              std::copy(mine.begin(), mine.end(),
                        recv.begin() + static_cast<long>(static_cast<size_t>(root) * block));
              a.send = recv.data() + static_cast<size_t>(root) * block;
            }
            const std::string what =
                fmt::format("rank {} root {} {} count {} {}", rank, root, to_string(t), count,
                            in_place ? "in place" : "out of place");
            const Status s = g.collective(rank, a, options);
            if (!s.ok()) return failures.add(what + ": " + s.to_string());
            if (rank == root) {
              std::string diff = compare(t, recv.data(), n * count, [&](size_t i) {
                return representable(t, value(static_cast<int>(i / count), i % count));
              });
              if (!diff.empty()) failures.add(what + ": " + diff);
            } else if (!untouched(recv)) {
              failures.add(what + ": recv written on a rank that is not the root");
            }
            if (send != mine) failures.add(what + ": send buffer changed");
          }
        }
      }
    }
  });
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Gather, GatherSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::binomial,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct})),
                         sweep_name);

class ScatterSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(ScatterSweep, EveryRootCountAndPlacement) {
  const SweepParam& p = GetParam();
  RankGroup g(transport_factory(p.transport), p.n);
  Options options = harness_options();
  options.set_algorithm(OpKind::scatter, p.algorithm);
  const size_t n = static_cast<size_t>(p.n);
  Failures failures;
  g.run([&](int rank) {
    for (int root : roots_for(p.n)) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
        for (DataType t : sizes_of_types()) {
          for (bool in_place : {false, true}) {
            const size_t es = dtype_size(t), block = count * es;
            // The root's send: block b holds rank b's values; off the root a sentinel buffer.
            const std::vector<std::byte> all = make_buffer(t, n * count, [&](size_t i) {
              return value(static_cast<int>(i / count), i % count);
            });
            std::vector<std::byte> send =
                rank == root ? all : std::vector<std::byte>(n * block, kSentinel);
            std::vector<std::byte> recv(block, kSentinel);
            CollectiveArgs a;
            a.kind = OpKind::scatter;
            a.dtype = t;
            a.count = count;
            a.root = root;
            a.send = send.data();
            a.recv = recv.data();
            if (in_place && rank == root) a.recv = send.data() + static_cast<size_t>(root) * block;
            const std::string what =
                fmt::format("rank {} root {} {} count {} {}", rank, root, to_string(t), count,
                            in_place ? "in place" : "out of place");
            const Status s = g.collective(rank, a, options);
            if (!s.ok()) return failures.add(what + ": " + s.to_string());
            std::string diff = compare(t, a.recv, count, [&](size_t i) {
              return representable(t, value(rank, i));
            });
            if (!diff.empty()) failures.add(what + ": " + diff);
            if (rank == root ? send != all : !untouched(send)) {
              failures.add(what + ": send buffer changed");
            }
          }
        }
      }
    }
  });
  failures.expect_none();
}

INSTANTIATE_TEST_SUITE_P(Scatter, ScatterSweep,
                         ::testing::ValuesIn(sweep(all_sizes(), {Algorithm::binomial,
                                                                 Algorithm::direct,
                                                                 Algorithm::shm_direct})),
                         sweep_name);

TEST(GatherScatterAutomatic, LargeBlocksAcrossTheThreshold) {
  for (size_t count : {size_t{100}, size_t{40001}}) {
    RankGroup g(transport_factory("local_rendezvous"), 6);
    const Options options = harness_options();
    std::vector<std::vector<int32_t>> send(6), recv(6), back(6);
    auto gathered = g.collective_all(
        [&](int r) {
          auto& s = send[static_cast<size_t>(r)];
          s.resize(count);
          for (size_t i = 0; i < count; ++i) s[i] = static_cast<int32_t>(r * 100000 + i);
          recv[static_cast<size_t>(r)].assign(r == 4 ? 6 * count : 0, -1);
          CollectiveArgs a;
          a.kind = OpKind::gather;
          a.dtype = DataType::int32;
          a.count = count;
          a.root = 4;
          a.send = s.data();
          a.recv = recv[static_cast<size_t>(r)].data();
          return a;
        },
        options);
    for (const Status& s : gathered) ASSERT_TRUE(s.ok()) << s.to_string();
    for (size_t b = 0; b < 6; ++b) {
      EXPECT_EQ(std::vector<int32_t>(recv[4].begin() + static_cast<long>(b * count),
                                     recv[4].begin() + static_cast<long>((b + 1) * count)),
                send[b]);
    }
    auto scattered = g.collective_all(
        [&](int r) {
          back[static_cast<size_t>(r)].assign(count, -1);
          CollectiveArgs a;
          a.kind = OpKind::scatter;
          a.dtype = DataType::int32;
          a.count = count;
          a.root = 4;
          a.send = recv[static_cast<size_t>(r)].data();
          a.recv = back[static_cast<size_t>(r)].data();
          return a;
        },
        options);
    for (const Status& s : scattered) ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(back, send);
  }
}

}  // namespace
}  // namespace weft::harness
