// Connection set-up asks the store a fixed number of times per rank, whatever the world size:
// every rank publishes one address (or segment name) and reads all its peers' in one multi_get,
// so a job's set-up makes O(n) round trips through the store, not one per pair of ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "multirank/comm_harness.h"

namespace weft::testing {
namespace {

// Counts the calls that read from the store (each one round trip to a TCP store).
class CountingStore final : public Store {
 public:
  explicit CountingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  Status set(std::string_view key, const Bytes& value) override { return inner_->set(key, value); }
  Result<Bytes> get(std::string_view key, std::chrono::milliseconds timeout) override {
    ++reads;
    return inner_->get(key, timeout);
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override { return inner_->add(key, delta); }
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    ++reads;
    return inner_->wait(keys, timeout);
  }
  Result<bool> check(const std::vector<std::string>& keys) override {
    ++reads;
    return inner_->check(keys);
  }
  Status erase(std::string_view key) override { return inner_->erase(key); }
  Result<std::vector<Bytes>> multi_get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout) override {
    ++reads;
    return inner_->multi_get(keys, timeout);
  }
  std::atomic<int> reads{0};

 private:
  std::shared_ptr<Store> inner_;
};

// The most reads any rank made to set up a communicator of `n` ranks (and run one allreduce).
int reads_to_set_up(int n, TransportKind transport, bool one_host) {
  auto shared = make_memory_store();
  std::vector<std::shared_ptr<CountingStore>> stores;
  for (int r = 0; r < n; ++r) stores.push_back(std::make_shared<CountingStore>(shared));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Options o = test_options();
      o.transport = transport;
      o.rank = r;
      o.size = n;
      o.host_id = one_host ? "one-host" : "host-" + std::to_string(r);
      auto comm = Communicator::create(o, stores[static_cast<size_t>(r)]);
      ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status().to_string();
      float x = 1;
      ASSERT_TRUE(comm.value()->allreduce(&x, &x, 1, DataType::fp32, ReduceOp::sum).ok());
      EXPECT_EQ(x, static_cast<float>(n));
    });
  }
  for (auto& t : threads) t.join();
  int most = 0;
  for (auto& s : stores) most = std::max(most, s->reads.load());
  return most;
}

TEST(ConnectionSetUp, TcpReadsTheStoreAFixedNumberOfTimesPerRank) {
  const int three = reads_to_set_up(3, TransportKind::tcp, false);  // a middle rank reads both ways
  const int seven = reads_to_set_up(7, TransportKind::tcp, false);
  EXPECT_EQ(three, seven) << "store reads per rank grow with the world size";
  EXPECT_LE(seven, 8);
}

TEST(ConnectionSetUp, SharedMemoryReadsTheStoreAFixedNumberOfTimesPerRank) {
  const int two = reads_to_set_up(2, TransportKind::shm, true);
  const int six = reads_to_set_up(6, TransportKind::shm, true);
  EXPECT_EQ(two, six) << "store reads per rank grow with the world size";
  EXPECT_LE(six, 8);
}

TEST(ConnectionSetUp, AutoOnOneHostReadsTheStoreAFixedNumberOfTimesPerRank) {
  // transport=auto with every rank on one host id: shared memory after the host-key exchange.
  const int two = reads_to_set_up(2, TransportKind::automatic, true);
  const int five = reads_to_set_up(5, TransportKind::automatic, true);
  EXPECT_EQ(two, five) << "store reads per rank grow with the world size";
}

}  // namespace
}  // namespace weft::testing
