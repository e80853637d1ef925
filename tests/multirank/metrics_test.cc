// Metrics (docs/observability.md): what Communicator::metrics() and the /metrics endpoint report
// after known work, with ranks as threads over each transport.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "multirank/comm_harness.h"

namespace weft::testing {
namespace {

// The sum of the samples of `name` whose labels include every pair of `labels` (exact name: a
// histogram's `_bucket`/`_count` lines are other names).
double sample_sum(const std::string& text, const std::string& name,
                  const std::map<std::string, std::string>& labels = {}, int* matches = nullptr) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    const std::string metric = line.substr(0, std::min(brace, space));
    if (metric != name) continue;
    const std::string label_text = brace == std::string::npos ? "" : line.substr(brace, space - brace);
    bool all = true;
    for (const auto& [k, v] : labels) {
      all = all && label_text.find(k + "=\"" + v + "\"") != std::string::npos;
    }
    if (!all) continue;
    sum += std::stod(line.substr(space + 1));
    ++n;
  }
  if (matches) *matches = n;
  return sum;
}

TEST(MetricsBuckets, PowersOfFourFromOneMicrosecond) {
  EXPECT_EQ(duration_bucket(0), 0);
  EXPECT_EQ(duration_bucket(1024), 0);
  EXPECT_EQ(duration_bucket(1025), 1);
  EXPECT_EQ(duration_bucket(4096), 1);
  EXPECT_EQ(duration_bucket(4097), 2);
  EXPECT_EQ(duration_bucket(uint64_t{1} << 34), kDurationBuckets - 2);
  EXPECT_EQ(duration_bucket((uint64_t{1} << 34) + 1), kDurationBuckets - 1);
  EXPECT_EQ(duration_bucket(UINT64_MAX), kDurationBuckets - 1);
  for (int i = 0; i + 1 < kDurationBuckets; ++i) {
    const auto bound = uint64_t(duration_bucket_bound(i) * 1e9 + 0.5);
    EXPECT_EQ(duration_bucket(bound), i) << bound;
    EXPECT_EQ(duration_bucket(bound + 1), i + 1) << bound;
  }
}

class Metrics : public CommunicatorOverEachTransport {};

TEST_P(Metrics, CountWhatRan) {
  run_comm_ranks(3, test_options(), [](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    }
    std::vector<int32_t> b(7, c.rank());
    ASSERT_TRUE(c.broadcast(b.data(), b.size(), DataType::int32, 1).ok());
    ASSERT_TRUE(c.broadcast(b.data(), b.size(), DataType::int32, 2).ok());
    char byte = 'x';
    if (c.rank() == 0) ASSERT_TRUE(c.send(&byte, 1, 1, 4).ok());
    if (c.rank() == 1) ASSERT_TRUE(c.recv(&byte, 1, 0, 4).ok());
    ASSERT_TRUE(c.barrier().ok());

    const std::string text = c.metrics();
    const std::map<std::string, std::string> me = {{"rank", std::to_string(c.rank())}};
    auto with = [&](std::map<std::string, std::string> more) {
      more.insert(me.begin(), me.end());
      return more;
    };
    EXPECT_EQ(sample_sum(text, "weft_collectives_total", with({{"op", "allreduce"}})), 5) << text;
    EXPECT_EQ(sample_sum(text, "weft_collectives_total", with({{"op", "broadcast"}})), 2);
    EXPECT_EQ(sample_sum(text, "weft_collectives_total", with({{"op", "barrier"}})), 1);
    EXPECT_EQ(sample_sum(text, "weft_collective_bytes_total", with({{"op", "allreduce"}})),
              5 * 1000 * 4);
    EXPECT_EQ(sample_sum(text, "weft_collective_duration_seconds_count", with({{"op", "allreduce"}})), 5);
    EXPECT_EQ(sample_sum(text, "weft_collective_duration_seconds_bucket",
                         with({{"op", "allreduce"}, {"le", "+Inf"}})), 5);
    EXPECT_GE(sample_sum(text, "weft_collective_duration_seconds_sum", with({{"op", "allreduce"}})), 0);
    EXPECT_EQ(sample_sum(text, "weft_p2p_operations_total", with({{"op", "send"}})),
              c.rank() == 0 ? 1 : 0);
    EXPECT_EQ(sample_sum(text, "weft_p2p_operations_total", with({{"op", "recv"}})),
              c.rank() == 1 ? 1 : 0);
    EXPECT_EQ(sample_sum(text, "weft_operation_errors_total"), 0);
    EXPECT_EQ(sample_sum(text, "weft_communicator_broken"), 0);
    EXPECT_EQ(sample_sum(text, "weft_peers_lost"), 0);
    EXPECT_EQ(sample_sum(text, "weft_build_info"), 1);
    int info = 0;
    sample_sum(text, "weft_communicator_info", with({{"size", "3"}}), &info);
    EXPECT_EQ(info, 1) << text;
  });
}

TEST_P(Metrics, CountErrorsAndRevokes) {
  run_comm_ranks(2, test_options(), [](Communicator& c) {
    std::vector<float> v(8, 1.0f);
    ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    ASSERT_TRUE(c.barrier().ok());
    if (c.rank() == 0) c.revoke();
    // Rank 1 learns of the revocation from rank 0, or its next call fails for it.
    Status st = c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum);
    EXPECT_FALSE(st.ok());
    const std::string text = c.metrics();
    EXPECT_EQ(sample_sum(text, "weft_operation_errors_total"), 1) << text;
    EXPECT_EQ(sample_sum(text, "weft_communicator_broken"), 1);
    EXPECT_EQ(sample_sum(text, "weft_revokes_total"), c.rank() == 0 ? 1 : 0);
  });
}

TEST_P(Metrics, OffCountsNothing) {
  Options o = test_options();
  o.metrics = false;
  run_comm_ranks(2, o, [](Communicator& c) {
    std::vector<float> v(8, 1.0f);
    ASSERT_TRUE(c.allreduce(v.data(), v.data(), v.size(), DataType::fp32, ReduceOp::sum).ok());
    const std::string text = c.metrics();
    int n = 0;
    sample_sum(text, "weft_collectives_total", {}, &n);
    EXPECT_EQ(n, 0) << text;
    EXPECT_EQ(sample_sum(text, "weft_build_info"), 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, Metrics,
                         ::testing::Values(TransportKind::tcp, TransportKind::shm),
                         transport_param_name);

// GET path from 127.0.0.1:port; the response body ("" on a connection error).
std::string http_get(uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == ssize_t(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
    }
  }
  ::close(fd);
  const size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

TEST(MetricsEndpoint, ServesEveryCommunicatorAndPublishesItsAddress) {
  Options o = test_options();
  o.transport = TransportKind::tcp;
  o.metrics_addr = "127.0.0.1:0";
  auto store = make_memory_store();
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  std::vector<std::string> addrs(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Options mine = o;
      mine.rank = r;
      mine.size = 2;
      auto comm = Communicator::create(mine, store);
      ASSERT_TRUE(comm.ok()) << comm.status().to_string();
      std::vector<float> v(4, 1.0f);
      for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE((*comm)->allreduce(v.data(), v.data(), 4, DataType::fp32, ReduceOp::sum).ok());
      }
      auto addr = store->get_string("weft-metrics/rank" + std::to_string(r), std::chrono::seconds(5));
      ASSERT_TRUE(addr.ok()) << addr.status().to_string();
      addrs[static_cast<size_t>(r)] = addr.value();
      ready.fetch_add(1);
      // Scraped while both communicators are alive.
      while (ready.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  }
  while (ready.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Both ranks are threads of this process: one endpoint serves them both.
  ASSERT_EQ(addrs[0], addrs[1]);
  ASSERT_EQ(addrs[0].rfind("127.0.0.1:", 0), 0u) << addrs[0];
  const auto port = static_cast<uint16_t>(std::stoi(addrs[0].substr(10)));
  ASSERT_NE(port, 0);
  const std::string text = http_get(port, "/metrics");
  ready.fetch_add(1);
  for (auto& t : threads) t.join();
  EXPECT_NE(text.find("# TYPE weft_collectives_total counter"), std::string::npos) << text;
  EXPECT_EQ(sample_sum(text, "weft_collectives_total", {{"rank", "0"}, {"op", "allreduce"}}), 3)
      << text;
  EXPECT_EQ(sample_sum(text, "weft_collectives_total", {{"rank", "1"}, {"op", "allreduce"}}), 3);
}

}  // namespace
}  // namespace weft::testing
