// Bad input to a shard: wrong dtype, shape or partition, an unknown tensor, another job's token,
// oversized and malformed messages, a stream dropped mid-push, a shard that is gone. Each gets a
// clear status naming the tensor or worker, nothing is half-applied, and the shard keeps serving.
#include <gtest/gtest.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <thread>

#include "ps/codec.h"
#include "ps_cluster.h"
#include "weft/ps/v1/ps.grpc.pb.h"

namespace weft::ps::test {
namespace {

using std::chrono::milliseconds;

TensorSpec small_spec(const std::string& name, uint32_t workers = 2) {
  TensorSpec s;
  s.name = name;
  s.shape = {8};
  s.num_workers = workers;
  s.optimizer.lr = 1.0f;
  return s;
}

bool contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

class PsBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = cluster_.client(1);
    ASSERT_TRUE(client_->init(small_spec("w"), std::vector<float>(8, 1.0f).data()).ok());
  }

  // A raw stub to shard 0 whose channel sends messages up to 64 MiB (the client's would refuse).
  std::unique_ptr<v1::ParameterServer::Stub> raw_stub() {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(cluster_.addresses[0], grpc::InsecureChannelCredentials(), args);
    return v1::ParameterServer::NewStub(channel_);
  }
  static void prepare(grpc::ClientContext& ctx, milliseconds deadline = milliseconds(10000)) {
    ctx.AddMetadata(kTokenKey, kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  }

  // The first chunk of a push of "w" (8 f32) by `worker`: the header and half the bytes.
  static v1::PushChunk first_chunk(uint32_t worker) {
    v1::PushChunk chunk;
    v1::PushHeader* h = chunk.mutable_header();
    h->set_name("w");
    h->set_dtype(v1::FP32);
    h->set_count(8);
    h->set_worker(worker);
    chunk.set_data(std::string(16, '\0'));
    return chunk;
  }

  // The tensor is untouched and the shard still serves.
  void expect_unchanged() {
    std::vector<float> out(8);
    auto v = client_->pull("w", out.data(), 8, DataType::fp32, 0);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v.value(), 0u);
    EXPECT_EQ(out, std::vector<float>(8, 1.0f));
  }

  PsCluster cluster_{1};
  std::unique_ptr<Client> client_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(PsBadInput, WrongDtypeIsInvalidArgumentNamingTensorAndWorker) {
  const std::vector<uint16_t> g(8, 0);
  auto r = client_->push("w", g.data(), 8, DataType::fp16, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(contains(r.status(), "INVALID_ARGUMENT")) << r.status().to_string();
  EXPECT_TRUE(contains(r.status(), "tensor 'w'")) << r.status().to_string();
  EXPECT_TRUE(contains(r.status(), "worker 1")) << r.status().to_string();
  EXPECT_TRUE(contains(r.status(), "shard 0")) << r.status().to_string();
  expect_unchanged();
}

TEST_F(PsBadInput, WrongShapeIsInvalidArgument) {
  const std::vector<float> g(7, 0.0f);
  auto r = client_->push("w", g.data(), 7, DataType::fp32, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(contains(r.status(), "pushed 7 elements, the partition has 8")) << r.status().to_string();
  // A second Init with another shape is refused too, naming the difference.
  TensorSpec other = small_spec("w");
  other.shape = {9};
  Status s = client_->init(other, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::mismatch);
  EXPECT_TRUE(contains(s, "shape [8] vs [9]")) << s.to_string();
  expect_unchanged();
}

TEST_F(PsBadInput, WrongPartitionIsRefused) {
  auto stub = raw_stub();
  v1::InitRequest init;
  to_proto(small_spec("w"), &init);
  init.set_part(5);
  v1::InitReply reply;
  grpc::ClientContext ctx;
  prepare(ctx);
  grpc::Status st = stub->Init(&ctx, init, &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("partition 5"), std::string::npos) << st.error_message();

  v1::GradientsRequest push;
  push.mutable_header()->set_name("w");
  push.mutable_header()->set_part(3);
  push.mutable_header()->set_dtype(v1::FP32);
  push.mutable_header()->set_count(8);
  push.set_data(std::string(32, '\0'));
  v1::PushReply pr;
  grpc::ClientContext ctx2;
  prepare(ctx2);
  st = stub->SendGradients(&ctx2, push, &pr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("tensor 'w' partition 3"), std::string::npos) << st.error_message();
  expect_unchanged();
}

TEST_F(PsBadInput, UnknownTensorIsNotFound) {
  std::vector<float> out(8);
  auto r = client_->pull("nope", out.data(), 8, DataType::fp32, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::not_found);
  EXPECT_TRUE(contains(r.status(), "tensor 'nope'")) << r.status().to_string();
  auto p = client_->push("nope", out.data(), 8, DataType::fp32, 0);
  EXPECT_EQ(p.status().code(), ErrorCode::not_found);
}

TEST_F(PsBadInput, AnotherJobsTokenIsPermissionDenied) {
  auto stranger = cluster_.client(3, "job/another-job");
  std::vector<float> g(8, 5.0f);
  auto r = stranger->push("w", g.data(), 8, DataType::fp32, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status(), "PERMISSION_DENIED")) << r.status().to_string();
  EXPECT_TRUE(contains(r.status(), "worker 3")) << r.status().to_string();
  EXPECT_FALSE(stranger->init(small_spec("x"), nullptr).ok());
  auto no_token = cluster_.client(3, "");
  EXPECT_FALSE(no_token->pull("w", g.data(), 8, DataType::fp32, 0).ok());
  expect_unchanged();
}

TEST_F(PsBadInput, OversizedMessageIsRefusedByTheServer) {
  auto stub = raw_stub();
  v1::GradientsRequest push;
  push.mutable_header()->set_name("w");
  push.mutable_header()->set_dtype(v1::FP32);
  push.mutable_header()->set_count(8);
  push.set_data(std::string(size_t{5} << 20, '\1'));  // 5 MiB: over the 4 MiB + 64 KiB limit
  v1::PushReply pr;
  grpc::ClientContext ctx;
  // Note: after this call gRPC 1.51 now and then (about 1 run in 50) takes 10 s to destroy the
  // channel that sent the oversized message; weft's Client never sends one (its channel has the
  // same limit), so only this test pays it.
  prepare(ctx, milliseconds(2000));
  grpc::Status st = stub->SendGradients(&ctx, push, &pr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  expect_unchanged();
}

TEST_F(PsBadInput, MalformedProtobufIsRefused) {
  raw_stub();
  grpc::GenericStub generic(channel_);
  const std::string garbage = "\xff\xff\xff\xff\x0f this is not a protobuf";
  grpc::Slice slice(garbage.data(), garbage.size());
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  prepare(ctx);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status st;
  generic.UnaryCall(&ctx, "/weft.ps.v1.ParameterServer/Init", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      st = s;
                      done = true;
                      cv.notify_all();
                    });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; }));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  lock.unlock();
  expect_unchanged();
}

TEST_F(PsBadInput, StreamDroppedMidPushAppliesNothing) {
  auto stub = raw_stub();
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::PushReply reply;
  auto writer = stub->Push(&ctx, &reply);
  const v1::PushChunk first = first_chunk(0);  // half of the partition
  ASSERT_TRUE(writer->Write(first));
  std::this_thread::sleep_for(milliseconds(100));
  ctx.TryCancel();  // the worker goes away
  EXPECT_FALSE(writer->Finish().ok());
  // The shard counts the dropped stream; the tensor is as it was, and worker 0 may push again.
  for (int i = 0; i < 100; ++i) {
    auto st = client_->stats(0);
    ASSERT_TRUE(st.ok());
    if (st->streams_dropped == 1) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(client_->stats(0)->streams_dropped, 1u);
  expect_unchanged();
  auto w0 = cluster_.client(0);
  const std::vector<float> g(8, 1.0f);
  ASSERT_TRUE(w0->push("w", g.data(), 8, DataType::fp32, 0).ok());
  ASSERT_TRUE(client_->push("w", g.data(), 8, DataType::fp32, 0).ok());
  std::vector<float> out(8);
  ASSERT_TRUE(client_->pull("w", out.data(), 8, DataType::fp32, 1).ok());
  EXPECT_EQ(out, std::vector<float>(8, -1.0f));  // 1 - (1 + 1)
}

TEST_F(PsBadInput, PushStreamWithASecondHeaderOrTooManyBytesIsRefused) {
  auto stub = raw_stub();
  for (int variant = 0; variant < 2; ++variant) {
    grpc::ClientContext ctx;
    prepare(ctx);
    v1::PushReply reply;
    auto writer = stub->Push(&ctx, &reply);
    const v1::PushChunk first = first_chunk(1);
    v1::PushChunk second = variant == 0 ? first : v1::PushChunk();
    if (variant == 1) second.set_data(std::string(17, '\0'));  // 33 bytes in all, 32 expected
    writer->Write(first);
    writer->Write(second);
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(variant == 0 ? "second header" : "more than the partition's 32 bytes"),
              std::string::npos) << st.error_message();
  }
  expect_unchanged();
}

TEST(PsShardGone, ClientGetsAnErrorNamingTheShardWithinTheDeadline) {
  PsCluster cluster(2);
  auto client = cluster.client(0, kToken, milliseconds(2000));
  // Names until one has its partition on shard 1.
  std::string name;
  for (int i = 0; name.empty(); ++i) {
    const std::string n = "t" + std::to_string(i);
    if (partition_map(n, 8, DataType::fp32, 2)[0].shard == 1) name = n;
  }
  ASSERT_TRUE(client->init(small_spec(name, 1), nullptr).ok());
  cluster.servers[1].reset();  // the shard is gone
  std::vector<float> out(8);
  const auto start = std::chrono::steady_clock::now();
  auto r = client->pull(name, out.data(), 8, DataType::fp32, 0);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status(), "shard 1")) << r.status().to_string();
  EXPECT_LT(took, milliseconds(3000));
}

TEST(PsShardGone, AWaitingPullEndsAtTheDeadlineOrWhenTheShardStops) {
  PsCluster cluster(1);
  auto client = cluster.client(0, kToken, milliseconds(300));
  ASSERT_TRUE(client->init(small_spec("b", 2), nullptr).ok());
  std::vector<float> out(8);
  auto late = client->pull("b", out.data(), 8, DataType::fp32, 1);  // worker 1 never pushes
  EXPECT_EQ(late.status().code(), ErrorCode::timeout);
  EXPECT_TRUE(contains(late.status(), "shard 0")) << late.status().to_string();

  auto patient = cluster.client(0, kToken, milliseconds(20000));
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cluster.servers[0]->stop();
  });
  const auto start = std::chrono::steady_clock::now();
  auto stopped = patient->pull("b", out.data(), 8, DataType::fp32, 1);
  stopper.join();
  EXPECT_FALSE(stopped.ok());
  EXPECT_TRUE(contains(stopped.status(), "shard 0")) << stopped.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
}

}  // namespace
}  // namespace weft::ps::test
