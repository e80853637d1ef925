// The shard's state without gRPC: the partition map, the optimizers against hand-computed
// references, bsp's worker-order sum under every arrival order, ssp's bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "ps/partition_state.h"
#include "reduce/reduce.h"
#include "weft/ps.h"

namespace weft::ps {
namespace {

Bytes as_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> as_floats(const Bytes& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

PartitionSpec spec(size_t count, Mode mode, uint32_t workers, OptimizerSpec opt = {}) {
  PartitionSpec s;
  s.tensor.name = "w";
  s.tensor.dtype = DataType::fp32;
  s.tensor.shape = {count};
  s.tensor.mode = mode;
  s.tensor.num_workers = workers;
  s.tensor.optimizer = opt;
  s.count = count;
  return s;
}

std::vector<float> pull_now(PartitionState& p, uint32_t worker = 0, uint64_t min_version = 0) {
  auto snap = p.pull(worker, min_version, PartitionState::Clock::now(), nullptr);
  EXPECT_TRUE(snap.ok()) << snap.status().to_string();
  return snap.ok() ? as_floats(snap->data) : std::vector<float>{};
}

TEST(PsPartitionMap, SpreadsTwentyMiBOverThreeShardsTheSameWayForEveryClient) {
  const size_t count = (size_t{20} << 20) / 4;  // 20 MiB of f32
  const std::vector<Partition> map = partition_map("embedding", count, DataType::fp32, 3);
  ASSERT_EQ(map.size(), 5u);  // 4 MiB partitions
  std::set<int> shards;
  size_t covered = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    EXPECT_EQ(map[i].part, i);
    EXPECT_EQ(map[i].offset, covered);
    EXPECT_EQ(map[i].count, kPartitionBytes / 4);
    covered += map[i].count;
    shards.insert(map[i].shard);
  }
  EXPECT_EQ(covered, count);
  EXPECT_EQ(shards.size(), 3u);  // every shard holds some
  // Every client (thread) computes the same map.
  std::vector<std::vector<Partition>> seen(4);
  std::vector<std::thread> clients;
  for (auto& s : seen) {
    clients.emplace_back([&s, count] { s = partition_map("embedding", count, DataType::fp32, 3); });
  }
  for (auto& t : clients) t.join();
  for (const auto& s : seen) {
    ASSERT_EQ(s.size(), map.size());
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].shard, map[i].shard);
      EXPECT_EQ(s[i].offset, map[i].offset);
      EXPECT_EQ(s[i].count, map[i].count);
    }
  }
}

TEST(PsPartitionMap, EdgeCases) {
  EXPECT_EQ(partition_map("x", 0, DataType::fp32, 2).size(), 1u);
  EXPECT_EQ(partition_map("x", 0, DataType::fp32, 2)[0].count, 0u);
  const auto odd = partition_map("x", kPartitionBytes / 2 + 1, DataType::fp16, 4);
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_EQ(odd[1].count, 1u);
  EXPECT_TRUE(partition_map("x", 10, DataType::fp32, 0).empty());
  // Different names start on different shards (the hash), so small tensors spread too.
  std::set<int> first;
  for (int i = 0; i < 32; ++i) first.insert(partition_map("t" + std::to_string(i), 1, DataType::fp32, 4)[0].shard);
  EXPECT_EQ(first.size(), 4u);
}

TEST(PsOptimizer, SgdMomentumAdamOneStepMatchHandComputedValues) {
  const std::vector<float> w0 = {1.0f, -2.0f, 0.5f};
  const std::vector<float> g = {0.5f, 0.25f, -1.0f};
  {
    OptimizerSpec o{OptimizerKind::sgd, 0.5f};
    PartitionState p(spec(3, Mode::async, 1, o), as_bytes(w0));
    ASSERT_TRUE(p.push(0, 0, as_bytes(g).data(), 12).ok());
    EXPECT_EQ(pull_now(p), (std::vector<float>{0.75f, -2.125f, 1.0f}));
  }
  {
    OptimizerSpec o{OptimizerKind::momentum, 0.5f, 0.5f};
    PartitionState p(spec(3, Mode::async, 1, o), as_bytes(w0));
    ASSERT_TRUE(p.push(0, 0, as_bytes(g).data(), 12).ok());
    ASSERT_TRUE(p.push(0, 1, as_bytes(g).data(), 12).ok());
    // m1 = g, w1 = w0 - 0.5 g; m2 = 0.5 g + g = 1.5 g, w2 = w1 - 0.75 g = w0 - 1.25 g.
    EXPECT_EQ(pull_now(p), (std::vector<float>{0.375f, -2.3125f, 1.75f}));
  }
  {
    OptimizerSpec o{OptimizerKind::adam, 0.1f, 0.0f, 0.9f, 0.999f, 1e-8f};
    PartitionState p(spec(3, Mode::async, 1, o), as_bytes(w0));
    ASSERT_TRUE(p.push(0, 0, as_bytes(g).data(), 12).ok());
    // First Adam step: m_hat = g, v_hat = g^2, so w -= lr * g / (|g| + eps) = lr * sign(g).
    const std::vector<float> w = pull_now(p);
    for (size_t i = 0; i < 3; ++i) {
      const double ref = w0[i] - 0.1 * g[i] / (std::fabs(g[i]) + 1e-8);
      EXPECT_NEAR(w[i], ref, 1e-6) << i;
    }
  }
}

TEST(PsBsp, SumIsBitIdenticalWhateverTheArrivalOrder) {
  constexpr uint32_t kWorkers = 5;
  constexpr size_t kCount = 257;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<Bytes> grads;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    std::vector<float> g(kCount);
    for (float& x : g) x = dist(rng);  // wide range: float sums differ by order
    grads.push_back(as_bytes(g));
  }
  // Reference: sum in worker order, then SGD with lr 1 from zeros (w = -sum).
  Bytes sum = grads[0];
  for (uint32_t w = 1; w < kWorkers; ++w) reduce_into(sum.data(), grads[w].data(), kCount, DataType::fp32, ReduceOp::sum);
  std::vector<float> expected = as_floats(sum);
  for (float& x : expected) x = 0.0f - 1.0f * x;

  std::vector<uint32_t> order(kWorkers);
  std::iota(order.begin(), order.end(), 0u);
  bool some_order_differs = false;
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(order.begin(), order.end(), rng);
    PartitionState p(spec(kCount, Mode::bsp, kWorkers, {OptimizerKind::sgd, 1.0f}), {});
    for (size_t i = 0; i < order.size(); ++i) {
      auto out = p.push(order[i], 0, grads[order[i]].data(), grads[order[i]].size());
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      EXPECT_EQ(out->version, i + 1 == order.size() ? 1u : 0u);  // applied with the last one
    }
    const std::vector<float> got = pull_now(p, 0, 1);
    ASSERT_EQ(std::memcmp(got.data(), expected.data(), kCount * 4), 0) << "trial " << trial;
    // The arrival-order sum would not always be these bits: the test can tell.
    Bytes naive = grads[order[0]];
    for (size_t i = 1; i < order.size(); ++i) reduce_into(naive.data(), grads[order[i]].data(), kCount, DataType::fp32, ReduceOp::sum);
    if (naive != sum) some_order_differs = true;
  }
  EXPECT_TRUE(some_order_differs);
}

TEST(PsBsp, AverageOfHalfPrecisionGradientsUsesTheReductionKernels) {
  PartitionSpec s = spec(3, Mode::bsp, 2, {OptimizerKind::sgd, 1.0f});
  s.tensor.dtype = DataType::bf16;
  s.tensor.aggregate = ReduceOp::avg;
  auto encode = [](std::vector<float> v) {
    Bytes b(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = float_to_bf16(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    return b;
  };
  PartitionState p(s, encode({1.0f, 2.0f, 3.0f}));
  ASSERT_TRUE(p.push(1, 0, encode({1.0f, 3.0f, -2.0f}).data(), 6).ok());
  ASSERT_TRUE(p.push(0, 0, encode({3.0f, 1.0f, 4.0f}).data(), 6).ok());
  auto snap = p.pull(0, 1, PartitionState::Clock::now(), nullptr);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->data, encode({-1.0f, 0.0f, 2.0f}));  // w - (g0 + g1) / 2
}

TEST(PsBsp, RefusesAStalePushAndASecondPushForTheSameVersion) {
  PartitionState p(spec(2, Mode::bsp, 2), {});
  const Bytes g(8, 0);
  ASSERT_TRUE(p.push(0, 0, g.data(), 8).ok());
  auto twice = p.push(0, 0, g.data(), 8);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), ErrorCode::mismatch);
  EXPECT_NE(twice.status().message().find("worker 0 already pushed"), std::string::npos);
  auto ahead = p.push(1, 3, g.data(), 8);
  EXPECT_EQ(ahead.status().code(), ErrorCode::mismatch);
  auto short_push = p.push(1, 0, g.data(), 4);
  EXPECT_EQ(short_push.status().code(), ErrorCode::invalid_argument);
  auto out_of_range = p.push(2, 0, g.data(), 8);
  EXPECT_EQ(out_of_range.status().code(), ErrorCode::invalid_argument);
  // Nothing of the refused pushes was staged: worker 1's real push completes the step.
  ASSERT_TRUE(p.push(1, 0, g.data(), 8).ok());
  EXPECT_EQ(p.version(), 1u);
}

TEST(PsBsp, PullOfTheNextVersionWaitsForEveryWorkerAndTimesOut) {
  PartitionState p(spec(1, Mode::bsp, 2), {});
  const Bytes g(4, 0);
  ASSERT_TRUE(p.push(0, 0, g.data(), 4).ok());
  const auto start = PartitionState::Clock::now();
  auto early = p.pull(0, 1, start + std::chrono::milliseconds(100), nullptr);
  EXPECT_EQ(early.status().code(), ErrorCode::timeout);
  EXPECT_GE(PartitionState::Clock::now() - start, std::chrono::milliseconds(100));
  std::thread late([&] { ASSERT_TRUE(p.push(1, 0, g.data(), 4).ok()); });
  auto ready = p.pull(0, 1, PartitionState::Clock::now() + std::chrono::seconds(10), nullptr);
  late.join();
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->version, 1u);
}

TEST(PsAsync, AppliesEveryPushOnArrival) {
  PartitionState p(spec(1, Mode::async, 2, {OptimizerKind::sgd, 1.0f}), {});
  const Bytes g = as_bytes({1.0f});
  for (uint64_t v = 0; v < 3; ++v) ASSERT_TRUE(p.push(v % 2, 0, g.data(), 4).ok());
  EXPECT_EQ(p.version(), 3u);
  EXPECT_EQ(pull_now(p), std::vector<float>{-3.0f});
}

TEST(PsSsp, RejectsBeyondTheBoundCountsItAndBlocksTheFastPuller) {
  PartitionSpec s = spec(1, Mode::ssp, 2, {OptimizerKind::sgd, 1.0f});
  s.tensor.staleness = 1;
  PartitionState q(s, {});
  const Bytes g = as_bytes({1.0f});
  // Worker 0 pushes from versions 0, 1, 2; worker 1 is still at base 0.
  for (uint64_t v = 0; v < 3; ++v) ASSERT_TRUE(q.push(0, v, g.data(), 4)->applied);
  auto stale = q.push(1, 0, g.data(), 4);  // current 3 - base 0 = 3 > 1
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->version, 3u);
  EXPECT_EQ(stale->rejected_stale, 1u);
  auto fresh = q.push(1, 2, g.data(), 4);  // 3 - 2 = 1 <= 1
  EXPECT_TRUE(fresh->applied);
  EXPECT_EQ(q.counters()[1].rejected_stale, 1u);
  // Worker 0 made 3 pushes, worker 1 two: 1 ahead is allowed, a fourth push is not.
  EXPECT_TRUE(q.pull(0, 0, PartitionState::Clock::now(), nullptr).ok());
  ASSERT_TRUE(q.push(0, 4, g.data(), 4)->applied);
  auto blocked = q.pull(0, 0, PartitionState::Clock::now() + std::chrono::milliseconds(100), nullptr);
  EXPECT_EQ(blocked.status().code(), ErrorCode::timeout);
  ASSERT_TRUE(q.push(1, 5, g.data(), 4)->applied);
  EXPECT_TRUE(q.pull(0, 0, PartitionState::Clock::now(), nullptr).ok());
}

}  // namespace
}  // namespace weft::ps
