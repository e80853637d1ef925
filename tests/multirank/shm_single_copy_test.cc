// Single-copy receives over shared memory (Options::shm_cma_threshold): a large message is read
// by the receiver straight from the sender's buffer with process_vm_readv. Ranks are threads of
// this process here (the kernel lets a process read its own memory); real processes, and the
// fallback when the kernel refuses, are in tests/process/shm_process_test.cc.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "multirank/comm_harness.h"
#include "multirank/harness.h"

namespace weft {
namespace {

using testing::run_comm_ranks;

Options single_copy_options(size_t threshold) {
  Options o = testing::test_options();
  o.transport = TransportKind::shm;
  o.shm_cma_threshold = threshold;
  o.set_algorithm(OpKind::allreduce, Algorithm::ring);
  return o;
}

nlohmann::json counters(const Communicator& c) {
  return nlohmann::json::parse(c.flight_record_json())["transport_counters"];
}

// A ring of point-to-point messages around and across the thresholds (eager 64 KiB, single copy
// from 64 KiB + 1), contents checked.
void ring_of_messages(Communicator& c) {
  const int n = c.size(), r = c.rank();
  for (size_t bytes : {size_t{65536}, size_t{65537}, (size_t{1} << 20) + 3, size_t{3} << 20}) {
    SCOPED_TRACE(fmt::format("{} bytes", bytes));
    std::vector<uint8_t> out(bytes), in(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(i * 31 + r);
    auto s = c.send_async(out.data(), bytes, (r + 1) % n, 3);
    const int from = (r + n - 1) % n;
    const Status received = c.recv(in.data(), bytes, from, 3);
    ASSERT_TRUE(received.ok()) << received.to_string();
    const Status sent = s->wait();
    ASSERT_TRUE(sent.ok()) << sent.to_string();
    for (size_t i = 0; i < bytes; i += 4093) {
      ASSERT_EQ(in[i], static_cast<uint8_t>(i * 31 + from)) << i;
    }
    ASSERT_EQ(in[bytes - 1], static_cast<uint8_t>((bytes - 1) * 31 + from));
  }
}

TEST(ShmSingleCopy, CollectivesAndMessagesAreReadFromTheSendersBuffer) {
  if (!harness::cma_allowed()) GTEST_SKIP() << "process_vm_readv is refused here: " << std::strerror(errno);
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(fmt::format("world size {}", n));
    run_comm_ranks(n, single_copy_options(64 << 10), [n](Communicator& c) {
      const int r = c.rank();
      const size_t count = 300007;  // ring chunks of ~count/n floats: single copy
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((r + 1) * (i % 5));
      ASSERT_TRUE(c.allreduce(v.data(), v.data(), count, DataType::fp32, ReduceOp::sum).ok());
      for (size_t i = 0; i < count; i += 101) {
        ASSERT_EQ(v[i], static_cast<float>(n * (n + 1) / 2 * (i % 5))) << i;
      }

      const size_t per = 70001;
      std::vector<int32_t> send(per * n), recv(per * n, -1);
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(r * 1000003 + i);
      ASSERT_TRUE(c.alltoall(send.data(), recv.data(), per, DataType::int32).ok());
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < per; i += 997) {
          ASSERT_EQ(recv[p * per + i], static_cast<int32_t>(p * 1000003 + r * per + i)) << p;
        }
      }

      std::vector<double> b(200003, r == n - 1 ? 2.5 : -1.0);
      ASSERT_TRUE(c.broadcast(b.data(), b.size(), DataType::fp64, n - 1).ok());
      ASSERT_EQ(b.front(), 2.5);
      ASSERT_EQ(b.back(), 2.5);

      ring_of_messages(c);

      const auto k = counters(c);
      EXPECT_GT(k["shm_single_copy_messages"].get<uint64_t>(), 4u);
      EXPECT_GE(k["shm_single_copy_bytes"].get<uint64_t>(),
                k["shm_single_copy_messages"].get<uint64_t>() * (64 << 10));
      EXPECT_EQ(k["shm_single_copy_refused_peers"].get<uint64_t>(), 0u);
    });
  }
}

// Off (the default): the same messages go through the rings.
TEST(ShmSingleCopy, OffByDefault) {
  EXPECT_EQ(Options().shm_cma_threshold, 0u);
  run_comm_ranks(3, single_copy_options(0), [](Communicator& c) {
    ring_of_messages(c);
    EXPECT_EQ(counters(c)["shm_single_copy_messages"].get<uint64_t>(), 0u);
  });
}

}  // namespace
}  // namespace weft
