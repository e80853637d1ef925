// Hierarchical collectives: ranks as threads with host ids that split them into pretend hosts
// (2 hosts x 2 ranks, the same interleaved, 3 hosts with 1, 2 and 3 ranks, 2 x 3). Every dtype
// and op of allreduce and reduce_scatter, every dtype of allgather and broadcast (every root), in
// and out of place,
// at counts that are 0, tiny, not divisible by the ranks per host and divisible (the slice path),
// must match the reference; the flight record must show that the hierarchy ran them. Counts of
// 5000 take the per-slice allgather and reduce_scatter on the uniform layouts (16 KiB or more).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <ctime>
#include <string>
#include <vector>

#include "core/hierarchy.h"
#include "multirank/comm_harness.h"
#include "multirank/data.h"

namespace weft {
namespace {

using harness::close_enough;
using harness::input_value;
using harness::load;
using harness::reference;
using harness::store;

struct Layout {
  const char* name;
  std::vector<std::string> hosts;  // host id of each rank
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> v = {
      {"2x2", {"a", "a", "b", "b"}},
      {"2x2_interleaved", {"a", "b", "a", "b"}},
      {"1_2_3", {"a", "b", "b", "c", "c", "c"}},
      {"2x3", {"a", "b", "a", "b", "a", "b"}},
  };
  return v;
}

Options layout_options() {
  Options o = testing::test_options();
  o.timeout = std::chrono::seconds(30);
  return o;
}

// The hierarchical compositions themselves: forced, so that measured cost cannot pick flat.
Options hierarchical_options() {
  Options o = layout_options();
  for (OpKind k : {OpKind::allreduce, OpKind::allgather, OpKind::reduce_scatter, OpKind::broadcast}) {
    o.set_algorithm(k, Algorithm::hierarchical);
  }
  return o;
}

// Runs fn on one thread per rank of `layout`, each on its pretend host.
void run_layout(const Layout& layout, const std::function<void(Communicator&)>& fn,
                const Options& base = hierarchical_options()) {
  auto store_ptr = make_memory_store();
  const int n = static_cast<int>(layout.hosts.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Options o = base;
      o.rank = r;
      o.size = n;
      o.host_id = std::string("hier-") + layout.hosts[static_cast<size_t>(r)];
      auto comm = Communicator::create(o, store_ptr);
      ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status().to_string();
      fn(*comm.value());
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<size_t> counts_for(const Layout& l) {
  (void)l;
  return {0, 1, 7, 12 * 37, 1200};  // 444 and 1200 divide by 2 and 3 (the slice path)
}

class Hierarchy : public ::testing::TestWithParam<Layout> {};

TEST_P(Hierarchy, AllreduceEveryDtypeAndOp) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  run_layout(layout, [&](Communicator& c) {
    const int r = c.rank();
    for (DataType t : harness::all_dtypes()) {
      for (ReduceOp op : harness::ops_for(t)) {
        for (size_t count : counts_for(layout)) {
          if (count > 7 && !harness::representative(t, op)) continue;
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(fmt::format("{} {} count {} {}", to_string(t), to_string(op), count,
                                     in_place ? "in place" : "out of place"));
            const size_t es = dtype_size(t);
            std::vector<uint8_t> in(count * es + 1), out(count * es + 1);
            for (size_t i = 0; i < count; ++i) store(t, in.data(), i, input_value(r, i, t, op));
            void* dst = in_place ? in.data() : out.data();
            ASSERT_TRUE(c.allreduce(in.data(), dst, count, t, op).ok());
            for (size_t i = 0; i < count; ++i) {
              const double want =
                  reference(t, op, n, [&](int p) { return input_value(p, i, t, op); });
              ASSERT_TRUE(close_enough(t, load(t, dst, i), want))
                  << "element " << i << " got " << load(t, dst, i) << " want " << want;
            }
          }
        }
      }
    }
    auto record = nlohmann::json::parse(c.flight_record_json());
    ASSERT_FALSE(record["entries"].empty());
    EXPECT_EQ(record["entries"].back()["algorithm"], "hierarchical");
  });
}

TEST_P(Hierarchy, ReduceScatterEveryDtypeAndOp) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  run_layout(layout, [&](Communicator& c) {
    const int r = c.rank();
    for (DataType t : harness::all_dtypes()) {
      for (ReduceOp op : harness::ops_for(t)) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{300}, size_t{5000}}) {
          if (count > 5 && !harness::representative(t, op)) continue;
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(fmt::format("{} {} count {} {}", to_string(t), to_string(op), count,
                                     in_place ? "in place" : "out of place"));
            const size_t es = dtype_size(t);
            std::vector<uint8_t> in(n * count * es + 1), out(count * es + 1);
            for (size_t i = 0; i < n * count; ++i) store(t, in.data(), i, input_value(r, i, t, op));
            void* dst = in_place ? in.data() + static_cast<size_t>(r) * count * es : out.data();
            ASSERT_TRUE(c.reduce_scatter(in.data(), dst, count, t, op).ok());
            for (size_t i = 0; i < count; ++i) {
              const size_t gi = static_cast<size_t>(r) * count + i;
              const double want =
                  reference(t, op, n, [&](int p) { return input_value(p, gi, t, op); });
              ASSERT_TRUE(close_enough(t, load(t, dst, i), want)) << "element " << i;
            }
          }
        }
      }
    }
  });
}

// Bytes of `count` elements of `t` as rank `r` contributes them (allgather and broadcast move
// them unchanged, so the dtype matters only for the sizes).
std::vector<uint8_t> pattern(DataType t, int r, size_t count) {
  std::vector<uint8_t> v(count * dtype_size(t) + 1, 0);
  for (size_t i = 0; i < count; ++i) store(t, v.data(), i, input_value(r, i, t, ReduceOp::max));
  v.resize(count * dtype_size(t));
  return v;
}

TEST_P(Hierarchy, AllgatherAndBroadcastFromEveryRootEveryDtype) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  run_layout(layout, [&](Communicator& c) {
    const int r = c.rank();
    for (DataType t : harness::all_dtypes()) {
      const size_t es = dtype_size(t);
      for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}, size_t{5000}}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(fmt::format("allgather {} count {} {}", to_string(t), count,
                                   in_place ? "in place" : "out of place"));
          const std::vector<uint8_t> mine = pattern(t, r, count);
          std::vector<uint8_t> all(n * count * es + 1, 0xa5);
          const void* send = mine.data();
          if (in_place) {
            std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r * count * es));
            send = all.data() + r * count * es;
          }
          ASSERT_TRUE(c.allgather(send, all.data(), count, t).ok());
          for (int p = 0; p < n; ++p) {
            const std::vector<uint8_t> want = pattern(t, p, count);
            ASSERT_TRUE(std::equal(want.begin(), want.end(),
                                   all.begin() + static_cast<std::ptrdiff_t>(p * count * es)))
                << "block of rank " << p;
          }
          ASSERT_EQ(all.back(), 0xa5) << "written past the end";
        }
      }
      for (int root = 0; root < n; ++root) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{777}}) {
          SCOPED_TRACE(fmt::format("broadcast {} root {} count {}", to_string(t), root, count));
          const std::vector<uint8_t> want = pattern(t, root, count);
          std::vector<uint8_t> b = r == root ? want : std::vector<uint8_t>(want.size(), 0x5a);
          ASSERT_TRUE(c.broadcast(b.data(), count, t, root).ok());
          ASSERT_EQ(b, want);
        }
      }
    }
    auto record = nlohmann::json::parse(c.flight_record_json());
    EXPECT_EQ(record["entries"].back()["algorithm"], "hierarchical");
  });
}

TEST_P(Hierarchy, ForcedFlatAlgorithmBypassesIt) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  Options flat = hierarchical_options();
  flat.set_algorithm(OpKind::allreduce, Algorithm::ring);
  run_layout(
      layout,
      [&](Communicator& c) {
        std::vector<float> v(100, 1.0f);
        ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
        EXPECT_EQ(v[99], static_cast<float>(n));
        auto record = nlohmann::json::parse(c.flight_record_json());
        EXPECT_EQ(record["entries"].back()["algorithm"], "ring");
      },
      flat);
}

// Left to auto, flat or hierarchical is measured: per kind and size class, three calls run
// hierarchically and three flat, then every rank runs the rest the same way (the cheaper one), with one
// sequence number taken by the agreement. Results are right throughout.
TEST_P(Hierarchy, AutoMeasuresFlatAgainstHierarchicalAndAgrees) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  constexpr int kCalls = 10;
  constexpr int kTrials = HierarchyChoice::kTrials;
  std::vector<std::vector<std::string>> chosen(static_cast<size_t>(n));
  run_layout(
      layout,
      [&](Communicator& c) {
        const int r = c.rank();
        for (int i = 0; i < kCalls; ++i) {
          std::vector<int64_t> v(300, r + i);
          ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::int64, ReduceOp::sum).ok());
          ASSERT_EQ(v[299], n * (n - 1) / 2 + n * i);
          std::vector<float> b(1000, r == 1 ? 2.5f + i : -1.0f);
          ASSERT_TRUE(c.broadcast(b.data(), b.size(), DataType::fp32, 1).ok());
          ASSERT_EQ(b[999], 2.5f + i);
        }
        auto entries = nlohmann::json::parse(c.flight_record_json())["entries"];
        ASSERT_EQ(entries.size(), 2u * kCalls);
        auto& mine = chosen[static_cast<size_t>(r)];
        for (const auto& e : entries) mine.push_back(e["algorithm"]);
        for (int k = 0; k < 2; ++k) {  // allreduce (even entries), broadcast (odd)
          for (int i = 0; i < kTrials; ++i) {
            EXPECT_EQ(mine[2 * i + k] == "hierarchical", i < kTrials / 2) << i << " " << mine[2 * i + k];
          }
          for (int i = kTrials; i < kCalls; ++i) EXPECT_EQ(mine[2 * i + k], mine[2 * kTrials + k]) << i;
        }
        // The agreement after each class's last trial took a sequence number.
        EXPECT_EQ(entries[2 * kTrials]["seq"].get<int>(), entries[2 * kTrials - 1]["seq"].get<int>() + 2);
      },
      layout_options());
  for (int r = 1; r < n; ++r) EXPECT_EQ(chosen[static_cast<size_t>(r)], chosen[0]) << "rank " << r;
}

// The peers on this host and the others, as flight_record_json()'s "transport" says.
std::string expected_transport(const Layout& layout, int r, bool mixed) {
  std::string local_peers;
  for (size_t p = 0; p < layout.hosts.size(); ++p) {
    if (static_cast<int>(p) != r && layout.hosts[p] == layout.hosts[static_cast<size_t>(r)]) {
      local_peers += fmt::format("{}{}", local_peers.empty() ? "" : ",", p);
    }
  }
  if (local_peers.empty()) return mixed ? "tcp (alone on its host)" : "tcp";
  return mixed ? fmt::format("mixed (shm to ranks {}, tcp to the others)", local_peers) : "tcp";
}

// transport=auto over several hosts: shm to the peers on this host only when the machine's
// ranks fit its CPUs (the ranks here are threads of this process on this machine).
TEST_P(Hierarchy, AutoUsesSharedMemoryInsideHostsWhenTheRanksFitTheCpus) {
  const Layout& layout = GetParam();
  const bool fits = layout.hosts.size() <= std::thread::hardware_concurrency();
  run_layout(
      layout,
      [&](Communicator& c) {
        EXPECT_EQ(nlohmann::json::parse(c.flight_record_json())["transport"],
                  expected_transport(layout, c.rank(), fits));
        ASSERT_TRUE(c.barrier().ok());
      },
      layout_options());
}

// transport=shm across hosts (the mixed transport) with allreduce forced to the flat ring.
Options mixed_ring_options() {
  Options o = layout_options();
  o.transport = TransportKind::shm;
  o.set_algorithm(OpKind::allreduce, Algorithm::ring);
  return o;
}

// transport=shm over several hosts: collectives run flat (kinds the hierarchy does not take, or
// forced algorithms) reach the peers on the same host through shared memory and the others
// through TCP; point-to-point goes over TCP, receives from any rank included. Sizes cover eager
// and rendezvous messages on both parts.
TEST_P(Hierarchy, FlatOperationsReachEachPeerOverItsOwnTransport) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  run_layout(
      layout,
      [&](Communicator& c) {
        const int r = c.rank();
        EXPECT_EQ(nlohmann::json::parse(c.flight_record_json())["transport"],
                  expected_transport(layout, r, true));
        for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
          SCOPED_TRACE(fmt::format("count {}", count));
          std::vector<int32_t> send(n * count), recv(n * count, -1);
          for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(r * 7 + i);
          ASSERT_TRUE(c.alltoall(send.data(), recv.data(), count, DataType::int32).ok());
          for (int p = 0; p < n; ++p) {
            for (size_t i = 0; i < count; i += 97) {
              ASSERT_EQ(recv[p * count + i], static_cast<int32_t>(p * 7 + r * count + i)) << p;
            }
          }
          std::vector<float> v(count, 1.0f + r);
          ASSERT_TRUE(c.allreduce(v.data(), v.data(), count, DataType::fp32, ReduceOp::sum).ok());
          ASSERT_EQ(v[count - 1], static_cast<float>(n * (n + 1) / 2));
          for (int root = 0; root < n; ++root) {
            std::vector<int32_t> got(r == root ? n * count : 0, -1), mine(count, r + 100);
            ASSERT_TRUE(c.gather(mine.data(), got.data(), count, DataType::int32, root).ok());
            for (int p = 0; r == root && p < n; ++p) ASSERT_EQ(got[p * count + count / 2], p + 100);
            std::vector<int64_t> sum(count, -1), one(count, r);
            ASSERT_TRUE(c.reduce(one.data(), sum.data(), count, DataType::int64, ReduceOp::sum, root).ok());
            if (r == root) ASSERT_EQ(sum[0], n * (n - 1) / 2);
          }
          ASSERT_TRUE(c.barrier().ok());
          // A ring of sends, then every rank's message to rank 0 from any source.
          std::vector<uint8_t> out(count * 4, static_cast<uint8_t>(r)), in(count * 4, 0xff);
          auto s = c.send_async(out.data(), out.size(), (r + 1) % n, 5);
          ASSERT_TRUE(c.recv(in.data(), in.size(), (r + n - 1) % n, 5).ok());
          ASSERT_TRUE(s->wait().ok());
          ASSERT_EQ(in.back(), static_cast<uint8_t>((r + n - 1) % n));
          if (r == 0) {
            std::vector<bool> seen(static_cast<size_t>(n), false);
            for (int k = 1; k < n; ++k) {
              int source = -1;
              ASSERT_TRUE(c.recv(in.data(), in.size(), kAnySource, 6, &source).ok());
              ASSERT_TRUE(source > 0 && source < n && !seen[static_cast<size_t>(source)]) << source;
              seen[static_cast<size_t>(source)] = true;
              ASSERT_EQ(in[count], static_cast<uint8_t>(source));
            }
          } else {
            ASSERT_TRUE(c.send(out.data(), out.size(), 0, 6).ok());
          }
        }
        auto record = nlohmann::json::parse(c.flight_record_json());
        for (const auto& e : record["entries"]) {
          if (e["op"] == "allreduce") EXPECT_EQ(e["algorithm"], "ring");
        }
      },
      mixed_ring_options());
}

// Ranks blocked in a flat collective over the mixed transport (one rank is late) sleep: the
// whole process, every rank's threads together, uses a small part of the wall time meanwhile.
TEST_P(Hierarchy, BlockedRanksOverTheMixedTransportSleep) {
  const Layout& layout = GetParam();
  const int n = static_cast<int>(layout.hosts.size());
  double cpu = 0, wall = 0;
  run_layout(
      layout,
      [&](Communicator& c) {
        float v = 1;
        ASSERT_TRUE(c.barrier().ok());
        if (c.rank() == n - 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the others are in
          timespec p0{}, p1{};
          clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
          const auto t0 = std::chrono::steady_clock::now();
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p1);
          wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          cpu = static_cast<double>(p1.tv_sec - p0.tv_sec) + (p1.tv_nsec - p0.tv_nsec) * 1e-9;
        }
        ASSERT_TRUE(c.allreduce(&v, &v, 1, DataType::fp32, ReduceOp::sum).ok());
        EXPECT_EQ(v, static_cast<float>(n));
      },
      mixed_ring_options());
  EXPECT_GT(wall, 1.0);
  EXPECT_LT(cpu, 0.2 * wall) << "process cpu " << cpu << " s while " << n - 1
                             << " ranks were blocked for " << wall << " s";
}

INSTANTIATE_TEST_SUITE_P(Layouts, Hierarchy, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

}  // namespace
}  // namespace weft
