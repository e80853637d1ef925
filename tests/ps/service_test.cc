// The parameter server through gRPC: shards in this process on 127.0.0.1 port 0, workers as
// threads. Round trips per dtype, a tensor spread over shards, bsp/async/ssp end to end.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "ps/shard.h"
#include "ps_cluster.h"
#include "reduce/reduce.h"

namespace weft::ps::test {
namespace {

// `values` in `dtype`'s encoding.
std::vector<uint8_t> encode(const std::vector<float>& values, DataType dtype) {
  std::vector<uint8_t> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DataType::fp32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t h = dtype == DataType::fp16 ? float_to_half(values[i]) : float_to_bf16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

TensorSpec make_spec(const std::string& name, size_t count, DataType dtype, Mode mode,
                     uint32_t workers, float lr = 1.0f) {
  TensorSpec s;
  s.name = name;
  s.dtype = dtype;
  s.shape = {count};
  s.mode = mode;
  s.num_workers = workers;
  s.optimizer.lr = lr;
  return s;
}

class PsRoundTrip : public ::testing::TestWithParam<DataType> {};

TEST_P(PsRoundTrip, InitPushPull) {
  const DataType dtype = GetParam();
  PsCluster cluster(2);
  auto client = cluster.client(0);
  ASSERT_TRUE(client);
  constexpr size_t kCount = 1001;
  std::vector<float> w(kCount), g(kCount), expected(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    w[i] = static_cast<float>(i % 97) * 0.5f;      // exact in every dtype
    g[i] = static_cast<float>(i % 13) * 0.25f - 1.0f;
    expected[i] = w[i] - g[i];
  }
  const auto w_bytes = encode(w, dtype), g_bytes = encode(g, dtype);
  ASSERT_TRUE(client->init(make_spec("w", kCount, dtype, Mode::bsp, 1), w_bytes.data()).ok());
  std::vector<uint8_t> out(w_bytes.size());
  auto v0 = client->pull("w", out.data(), kCount, dtype, 0);
  ASSERT_TRUE(v0.ok()) << v0.status().to_string();
  EXPECT_EQ(v0.value(), 0u);
  EXPECT_EQ(out, w_bytes);
  auto v1 = client->push_pull("w", g_bytes.data(), out.data(), kCount, dtype, 0);
  ASSERT_TRUE(v1.ok()) << v1.status().to_string();
  EXPECT_EQ(v1.value(), 1u);
  EXPECT_EQ(out, encode(expected, dtype));
  // The unary path does the same.
  auto sent = client->send_gradients("w", g_bytes.data(), kCount, dtype, 1);
  ASSERT_TRUE(sent.ok()) << sent.status().to_string();
  EXPECT_EQ(sent->version, 2u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PsRoundTrip,
                         ::testing::Values(DataType::fp32, DataType::fp16, DataType::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(PsService, TwentyMiBTensorIsSpreadOverThreeShardsAndComesBackWhole) {
  PsCluster cluster(3);
  auto client = cluster.client(0);
  const size_t count = (size_t{20} << 20) / 4;
  std::vector<float> w(count), g(count, 1.0f);
  for (size_t i = 0; i < count; ++i) w[i] = static_cast<float>(i % 1024);
  ASSERT_TRUE(client->init(make_spec("big", count, DataType::fp32, Mode::async, 1), w.data()).ok());
  auto pushed = client->push("big", g.data(), count, DataType::fp32, 0);
  ASSERT_TRUE(pushed.ok()) << pushed.status().to_string();
  std::vector<float> out(count);
  ASSERT_TRUE(client->pull("big", out.data(), count, DataType::fp32, 1).ok());
  for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(out[i], w[i] - 1.0f) << i;
  ASSERT_EQ(out.back(), w.back() - 1.0f);
  // Each shard holds exactly the partitions the map gives it, and all hold some.
  const auto map = partition_map("big", count, DataType::fp32, 3);
  for (int s = 0; s < 3; ++s) {
    const auto mine = std::count_if(map.begin(), map.end(), [s](const Partition& p) { return p.shard == s; });
    auto st = client->stats(s);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->partitions, static_cast<uint64_t>(mine)) << "shard " << s;
    EXPECT_GT(mine, 0);
  }
}

TEST(PsService, BspSumsAreBitIdenticalUnderShuffledArrival) {
  constexpr uint32_t kWorkers = 4;
  constexpr size_t kCount = 3000;
  constexpr int kSteps = 4;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
  std::vector<std::vector<std::vector<float>>> grads(kSteps, std::vector<std::vector<float>>(kWorkers));
  for (auto& step : grads)
    for (auto& g : step) {
      g.resize(kCount);
      for (float& x : g) x = dist(rng);
    }
  // Reference: every step sums the workers' gradients in worker order with the same kernel.
  std::vector<float> ref(kCount, 0.0f);
  for (int s = 0; s < kSteps; ++s) {
    std::vector<float> sum = grads[s][0];
    for (uint32_t w = 1; w < kWorkers; ++w)
      reduce_into(sum.data(), grads[s][w].data(), kCount, DataType::fp32, ReduceOp::sum);
    for (size_t i = 0; i < kCount; ++i) ref[i] -= 1.0f * sum[i];
  }
  for (int run = 0; run < 2; ++run) {
    PsCluster cluster(2);
    std::vector<std::vector<float>> results(kWorkers);
    std::vector<std::thread> workers;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        auto client = cluster.client(w);
        std::mt19937 delays(1000 * run + w);
        ASSERT_TRUE(client->init(make_spec("g", kCount, DataType::fp32, Mode::bsp, kWorkers), nullptr).ok());
        std::vector<float> out(kCount);
        for (int s = 0; s < kSteps; ++s) {
          std::this_thread::sleep_for(std::chrono::milliseconds(delays() % 20));  // shuffles arrival
          auto v = client->push_pull("g", grads[s][w].data(), out.data(), kCount, DataType::fp32, s);
          ASSERT_TRUE(v.ok()) << v.status().to_string();
          ASSERT_EQ(v.value(), static_cast<uint64_t>(s + 1));
        }
        results[w] = out;
      });
    }
    for (auto& t : workers) t.join();
    for (uint32_t w = 0; w < kWorkers; ++w) {
      ASSERT_EQ(results[w].size(), kCount);
      EXPECT_EQ(std::memcmp(results[w].data(), ref.data(), kCount * 4), 0) << "worker " << w;
    }
  }
}

TEST(PsService, AsyncAppliesEveryPushFromEveryWorker) {
  PsCluster cluster(2);
  constexpr uint32_t kWorkers = 3;
  constexpr int kPushes = 10;
  std::vector<std::thread> workers;
  auto setup = cluster.client(0);
  ASSERT_TRUE(setup->init(make_spec("a", 5, DataType::fp32, Mode::async, kWorkers), nullptr).ok());
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto client = cluster.client(w);
      const std::vector<float> g(5, 1.0f);
      for (int i = 0; i < kPushes; ++i) {
        auto r = client->push("a", g.data(), 5, DataType::fp32, 0);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_TRUE(r->applied);
      }
    });
  }
  for (auto& t : workers) t.join();
  std::vector<float> out(5);
  auto v = setup->pull("a", out.data(), 5, DataType::fp32, 0);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value(), kWorkers * kPushes);
  EXPECT_EQ(out, std::vector<float>(5, -static_cast<float>(kWorkers * kPushes)));
}

TEST(PsService, SspRejectsTooStalePushesAndCountsThem) {
  PsCluster cluster(1);
  auto fast = cluster.client(0), slow = cluster.client(1);
  TensorSpec spec = make_spec("s", 4, DataType::fp32, Mode::ssp, 2);
  spec.staleness = 2;
  ASSERT_TRUE(fast->init(spec, nullptr).ok());
  const std::vector<float> g(4, 1.0f);
  for (uint64_t v = 0; v < 3; ++v) ASSERT_TRUE(fast->push("s", g.data(), 4, DataType::fp32, v)->applied);
  auto stale = slow->push("s", g.data(), 4, DataType::fp32, 0);  // 3 - 0 > 2
  ASSERT_TRUE(stale.ok()) << stale.status().to_string();
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->version, 3u);
  auto ok = slow->push("s", g.data(), 4, DataType::fp32, 1);  // 3 - 1 <= 2
  EXPECT_TRUE(ok->applied);
  auto st = fast->stats(0);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rejected_stale, 1u);
  EXPECT_EQ(st->pushes_applied, 4u);
}

TEST(PsService, ClockReturnsOrderedTimestamps) {
  PsCluster cluster(1);
  auto client = cluster.client(0);
  auto s = client->clock(0);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_LE(s->client_send_ns, s->client_receive_ns);
  EXPECT_LE(s->server_receive_ns, s->server_send_ns);
  EXPECT_GT(s->server_receive_ns, 0);
}

TEST(PsService, AsyncCallsRunInOrderAndCompleteTheirWork) {
  PsCluster cluster(2);
  auto w0 = cluster.client(0), w1 = cluster.client(1);
  const size_t count = (size_t{5} << 20) / 4;  // two partitions
  ASSERT_TRUE(w0->init(make_spec("async", count, DataType::fp32, Mode::bsp, 2), nullptr).ok());
  std::vector<float> g(count, 1.0f), out0(count), out1(count);
  // Worker 0's push, then its pull of version 1, queued in that order: the pull waits for
  // worker 1, so the Work is not done while worker 1 has not pushed.
  PushResult pushed;
  uint64_t version = 0;
  WorkPtr push = w0->push_async("async", g.data(), count, DataType::fp32, 0, &pushed);
  WorkPtr pull = w0->pull_async("async", out0.data(), count, DataType::fp32, 1, &version);
  bool called = false;
  ASSERT_TRUE(pull->on_done([&](const Status& s) { called = s.ok(); }));
  EXPECT_TRUE(push->wait(std::chrono::milliseconds(10000)).ok());
  EXPECT_TRUE(pushed.applied);
  EXPECT_EQ(pull->wait(std::chrono::milliseconds(200)).code(), ErrorCode::timeout);
  EXPECT_FALSE(pull->test());
  WorkPtr both = w1->push_pull_async("async", g.data(), out1.data(), count, DataType::fp32, 0);
  ASSERT_TRUE(both->wait().ok()) << both->status().to_string();
  ASSERT_TRUE(pull->wait().ok()) << pull->status().to_string();
  EXPECT_TRUE(called);
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(out0, std::vector<float>(count, -2.0f));
  EXPECT_EQ(out1, out0);
  EXPECT_LE(pull->start_time(), pull->end_time());
  // An error is the Work's status.
  WorkPtr unknown = w0->pull_async("nope", out0.data(), 4, DataType::fp32, 0);
  EXPECT_EQ(unknown->wait().code(), ErrorCode::not_found);
}

}  // namespace
}  // namespace weft::ps::test
