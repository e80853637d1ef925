// Randomised hostile input (STYLE: parsers of network bytes are swept by randomised tests under
// g++): valid requests of every unary call, mutated (bytes flipped, truncated, garbage appended),
// sent raw to a shard. Every call ends with some status within its deadline, and the shard keeps
// serving: its tensors stay the right size and a well-formed client still works.
#include <gtest/gtest.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <random>

#include "ps/codec.h"
#include "ps_cluster.h"

namespace weft::ps::test {
namespace {

// One raw unary call; the status, or nullopt if it did not end within 10 s.
std::optional<grpc::Status> raw_call(grpc::GenericStub& stub, const std::string& method,
                                     const std::string& bytes) {
  grpc::ClientContext ctx;
  ctx.AddMetadata(kTokenKey, kToken);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice slice(bytes.data(), bytes.size());
  grpc::ByteBuffer request(&slice, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<grpc::Status> result;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    result = s;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, std::chrono::seconds(10), [&] { return result.has_value(); });
  return result;
}

TEST(PsHostileInput, MutatedRequestsNeverHangOrBreakTheShard) {
  PsCluster cluster(1);
  auto client = cluster.client(0);
  TensorSpec spec;
  spec.name = "w";
  spec.shape = {8};
  spec.num_workers = 2;
  ASSERT_TRUE(client->init(spec, nullptr).ok());

  std::vector<std::pair<std::string, std::string>> valid;  // method, serialized request
  v1::InitRequest init;
  to_proto(spec, &init);
  valid.emplace_back("Init", init.SerializeAsString());
  v1::GradientsRequest grads;
  grads.mutable_header()->set_name("w");
  grads.mutable_header()->set_dtype(v1::FP32);
  grads.mutable_header()->set_count(8);
  grads.set_data(std::string(32, '\0'));
  valid.emplace_back("SendGradients", grads.SerializeAsString());
  v1::ClockRequest clock;
  clock.set_client_send_ns(123);
  valid.emplace_back("Clock", clock.SerializeAsString());
  valid.emplace_back("Stats", v1::StatsRequest().SerializeAsString());

  auto channel = grpc::CreateChannel(cluster.addresses[0], grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  std::mt19937 rng(2024);
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    const auto& [method, original] = valid[rng() % valid.size()];
    std::string bytes = original;
    switch (rng() % 4) {
      case 0:  // flip a few bytes
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4) && !bytes.empty(); ++k)
          bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
        break;
      case 1:  // truncate
        bytes.resize(bytes.empty() ? 0 : rng() % bytes.size());
        break;
      case 2:  // append garbage
        for (int k = 0; k < 1 + static_cast<int>(rng() % 16); ++k) bytes.push_back(static_cast<char>(rng()));
        break;
      default:  // all garbage
        bytes.assign(rng() % 64, '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
    }
    const auto st = raw_call(stub, "/weft.ps.v1.ParameterServer/" + method, bytes);
    ASSERT_TRUE(st.has_value()) << method << " call " << i << " did not end";
    if (!st->ok()) ++refused;
    EXPECT_NE(st->error_code(), grpc::StatusCode::UNAVAILABLE) << method << ": " << st->error_message();
  }
  EXPECT_GT(refused, 0);  // the sweep did reach the refusals
  // The shard still serves, and "w" is still 8 floats at some version.
  std::vector<float> out(8);
  auto v = client->pull("w", out.data(), 8, DataType::fp32, 0);
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  auto stats = client->stats(0);
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->partitions, 1u);
}

}  // namespace
}  // namespace weft::ps::test
