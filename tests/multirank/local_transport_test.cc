// The local transport against the contract in transport/transport.h, request by request:
// matching by (peer, tag) in posting order, eager and rendezvous delivery, mismatches of
// fingerprint and byte count, begin_operation catching early messages, and fail().
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "collective/collective.h"
#include "runtime/completion.h"
#include "transport/local/local_transport.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

Fingerprint fp_of(OpKind kind, uint64_t count, uint64_t seq = 1) {
  Fingerprint fp;
  fp.kind = kind;
  fp.dtype = DataType::fp32;
  fp.count = count;
  fp.seq = seq;
  return fp;
}

// A request plus its completion, for driving a transport by hand.
struct Req {
  Completion completion;
  Request r;
  Req(Request::Kind kind, int peer, uint64_t tag, void* buf, size_t bytes, Fingerprint fp) {
    r.kind = kind;
    r.peer = peer;
    r.tag = tag;
    r.buf = buf;
    r.bytes = bytes;
    r.fp = fp;
    r.completion = &completion;
  }
  // Waits up to 2 s; false when still pending.
  bool wait() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (;;) {
      const uint32_t seen = completion.generation();
      if (r.done()) return true;
      if (!completion.wait_for_change(seen, deadline)) return r.done();
    }
  }
};

class LocalTransportTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override { t_ = make_local_transports(3, {.eager_threshold = GetParam()}); }
  std::vector<std::unique_ptr<Transport>> t_;
};

TEST_P(LocalTransportTest, SameKeyMatchesInPostingOrder) {
  const Fingerprint fp = fp_of(OpKind::allreduce, 1);
  int32_t a = 1, b = 2, c = 3, x = 0, y = 0, z = 0;
  Req s1(Request::Kind::send, 1, 7, &a, 4, fp), s2(Request::Kind::send, 1, 7, &b, 4, fp);
  Req r1(Request::Kind::recv, 0, 7, &x, 4, fp);
  t_[0]->post_send(&s1.r);
  t_[0]->post_send(&s2.r);  // both unexpected at rank 1
  t_[1]->post_recv(&r1.r);
  Req r2(Request::Kind::recv, 0, 7, &y, 4, fp), r3(Request::Kind::recv, 0, 7, &z, 4, fp);
  t_[1]->post_recv(&r2.r);
  t_[1]->post_recv(&r3.r);  // posted before its send: filled directly
  Req s3(Request::Kind::send, 1, 7, &c, 4, fp);
  t_[0]->post_send(&s3.r);
  for (Req* q : {&s1, &s2, &s3, &r1, &r2, &r3}) {
    ASSERT_TRUE(q->wait());
    EXPECT_TRUE(q->r.status.ok()) << q->r.status.to_string();
  }
  EXPECT_EQ(x, 1);
  EXPECT_EQ(y, 2);
  EXPECT_EQ(z, 3);
}

TEST_P(LocalTransportTest, DifferentTagsAndPeersDoNotMatch) {
  const Fingerprint fp = fp_of(OpKind::allreduce, 1);
  int32_t a = 5, b = 6, x = 0;
  Req wrong_tag(Request::Kind::send, 1, 8, &a, 4, fp), other_peer(Request::Kind::send, 1, 7, &b, 4, fp);
  t_[0]->post_send(&wrong_tag.r);
  t_[2]->post_send(&other_peer.r);
  Req r(Request::Kind::recv, 0, 7, &x, 4, fp);
  t_[1]->post_recv(&r.r);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(r.r.done());
  int32_t c = 9;
  Req right(Request::Kind::send, 1, 7, &c, 4, fp);
  t_[0]->post_send(&right.r);
  ASSERT_TRUE(r.wait());
  EXPECT_EQ(x, 9);
  t_[1]->fail(Status(ErrorCode::aborted, "cleanup"));  // ends the rendezvous sends still queued
}

TEST_P(LocalTransportTest, LargeSendWaitsForItsReceiveUnlessEager) {
  const Fingerprint fp = fp_of(OpKind::broadcast, 256);
  std::vector<float> src(256, 1.5f), dst(256, 0.0f);
  Req s(Request::Kind::send, 2, 1, src.data(), 1024, fp);
  t_[0]->post_send(&s.r);
  std::this_thread::sleep_for(milliseconds(10));
  // eager_threshold 0 or 64: 1 KiB waits for the receiver (rendezvous); 1 MiB: copied at once.
  EXPECT_EQ(s.r.done(), GetParam() >= 1024);
  Req r(Request::Kind::recv, 0, 1, dst.data(), 1024, fp);
  t_[2]->post_recv(&r.r);
  ASSERT_TRUE(s.wait());
  ASSERT_TRUE(r.wait());
  EXPECT_TRUE(s.r.status.ok());
  EXPECT_EQ(dst, src);
}

TEST_P(LocalTransportTest, ZeroByteMessagesWithNullBuffers) {
  const Fingerprint fp = fp_of(OpKind::barrier, 0);
  Req s(Request::Kind::send, 1, 3, nullptr, 0, fp), r(Request::Kind::recv, 0, 3, nullptr, 0, fp);
  t_[0]->post_send(&s.r);
  t_[1]->post_recv(&r.r);
  ASSERT_TRUE(s.wait());
  ASSERT_TRUE(r.wait());
  EXPECT_TRUE(s.r.status.ok());
  EXPECT_TRUE(r.r.status.ok());
}

TEST_P(LocalTransportTest, FingerprintMismatchEndsBothNamingBothCalls) {
  int32_t a = 1, x = 0;
  Req s(Request::Kind::send, 1, 4, &a, 4, fp_of(OpKind::allreduce, 1));
  Req r(Request::Kind::recv, 0, 4, &x, 4, fp_of(OpKind::allgather, 1));
  t_[1]->post_recv(&r.r);
  t_[0]->post_send(&s.r);
  ASSERT_TRUE(s.wait());
  ASSERT_TRUE(r.wait());
  EXPECT_EQ(s.r.status.code(), ErrorCode::mismatch);
  EXPECT_EQ(r.r.status.code(), ErrorCode::mismatch);
  EXPECT_EQ(r.r.status.message(),
            "rank 1: rank 0 called allreduce #1 (f32 x 1, sum) but rank 1 called allgather #1 "
            "(f32 x 1)");
  EXPECT_EQ(s.r.status.message().rfind("rank 0: rank 0 called", 0), 0u) << s.r.status.message();
  EXPECT_EQ(x, 0);
}

TEST_P(LocalTransportTest, ByteCountMismatch) {
  int64_t a = 1, x = 0;
  const Fingerprint fp = fp_of(OpKind::alltoallv, 0);
  Req s(Request::Kind::send, 1, 4, &a, 8, fp), r(Request::Kind::recv, 0, 4, &x, 4, fp);
  t_[0]->post_send(&s.r);
  t_[1]->post_recv(&r.r);
  ASSERT_TRUE(s.wait());
  ASSERT_TRUE(r.wait());
  // An eager send was complete before the receive existed; a rendezvous one learns of it.
  EXPECT_EQ(s.r.status.code(), GetParam() >= 8 ? ErrorCode::ok : ErrorCode::mismatch);
  EXPECT_EQ(r.r.status.code(), ErrorCode::mismatch);
  EXPECT_EQ(r.r.status.message(),
            "rank 1: rank 0 sent 8 bytes in alltoallv #1 (f32 x 0) but rank 1 expected 4 bytes");
}

TEST_P(LocalTransportTest, BeginOperationCatchesAnEarlyMessageOfAnotherCall) {
  int32_t a = 1, x = 0;
  const Fingerprint sender_fp = fp_of(OpKind::allreduce, 1, 5);
  t_[0]->begin_operation(sender_fp);
  Req s(Request::Kind::send, 1, collective_tag(5, 0), &a, 4, sender_fp);
  t_[0]->post_send(&s.r);
  // Rank 0 waits for rank 1's reply in the same operation.
  Req reply(Request::Kind::recv, 1, collective_tag(5, 1), &x, 4, sender_fp);
  t_[0]->post_recv(&reply.r);
  t_[1]->begin_operation(fp_of(OpKind::reduce, 1, 5));
  // Rank 0 learns of the mismatch itself, not as a lost peer.
  ASSERT_TRUE(reply.wait());
  EXPECT_EQ(reply.r.status.code(), ErrorCode::mismatch) << reply.r.status.to_string();
  // Everything rank 1 posts for operation 5 now fails at once.
  Req r(Request::Kind::recv, 0, collective_tag(5, 0), &x, 4, fp_of(OpKind::reduce, 1, 5));
  t_[1]->post_recv(&r.r);
  ASSERT_TRUE(r.wait());
  EXPECT_EQ(r.r.status.code(), ErrorCode::mismatch);
  EXPECT_NE(r.r.status.message().find("rank 0 called allreduce #5"), std::string::npos);
  ASSERT_TRUE(s.wait());
  // Messages of other operations are not affected.
  Req s6(Request::Kind::send, 1, collective_tag(6, 0), &a, 4, fp_of(OpKind::reduce, 1, 6));
  Req r6(Request::Kind::recv, 0, collective_tag(6, 0), &x, 4, fp_of(OpKind::reduce, 1, 6));
  t_[1]->begin_operation(fp_of(OpKind::reduce, 1, 6));
  t_[0]->begin_operation(fp_of(OpKind::reduce, 1, 6));
  t_[0]->post_send(&s6.r);
  t_[1]->post_recv(&r6.r);
  ASSERT_TRUE(r6.wait());
  EXPECT_TRUE(r6.r.status.ok()) << r6.r.status.to_string();
  ASSERT_TRUE(s6.wait());
}

// A message of an operation the receiver has left without taking it: the receiver's transport
// fails with a mismatch that names both operations (the TCP transport does the same).
TEST_P(LocalTransportTest, MessageOfAnOperationTheReceiverLeftIsAMismatch) {
  int32_t a = 1;
  t_[0]->begin_operation(fp_of(OpKind::reduce, 1, 3));
  t_[1]->begin_operation(fp_of(OpKind::reduce, 1, 3));
  Req s(Request::Kind::send, 1, collective_tag(3, 0), &a, 4, fp_of(OpKind::reduce, 1, 3));
  t_[0]->post_send(&s.r);  // rank 1 never receives it
  t_[1]->begin_operation(fp_of(OpKind::reduce, 1, 4));
  EXPECT_EQ(t_[1]->error().code(), ErrorCode::mismatch);
  EXPECT_EQ(t_[1]->error().message(),
            "rank 1: rank 0 sent a message of reduce #3 (f32 x 1, sum, root -1) that rank 1 (now "
            "in reduce #4 (f32 x 1, sum, root -1)) never received: the ranks called different "
            "collectives");
  ASSERT_TRUE(s.wait());
  // And a late message of a finished operation is caught when it arrives.
  t_[2]->begin_operation(fp_of(OpKind::reduce, 1, 4));
  Req late(Request::Kind::send, 2, collective_tag(3, 0), &a, 4, fp_of(OpKind::reduce, 1, 3));
  t_[0]->post_send(&late.r);
  ASSERT_TRUE(late.wait());
  EXPECT_EQ(late.r.status.code(), ErrorCode::mismatch);
  EXPECT_NE(t_[2]->error().message().find("never received"), std::string::npos)
      << t_[2]->error().message();
}

TEST_P(LocalTransportTest, FailEndsOwnRequestsAndPeersWaitingOnIt) {
  const Fingerprint fp = fp_of(OpKind::allreduce, 1);
  int32_t x = 0, y = 0, big[1024] = {};
  Req own_recv(Request::Kind::recv, 2, 1, &x, 4, fp);     // rank 0 waits on rank 2
  Req peer_recv(Request::Kind::recv, 0, 1, &y, 4, fp);    // rank 1 waits on rank 0
  Req own_send(Request::Kind::send, 2, 2, big, sizeof big, fp);  // large: waits at rank 2 unless eager
  Req unrelated(Request::Kind::recv, 2, 1, &y, 4, fp);    // rank 1 waits on rank 2: unaffected
  t_[0]->post_recv(&own_recv.r);
  t_[1]->post_recv(&peer_recv.r);
  t_[0]->post_send(&own_send.r);
  t_[1]->post_recv(&unrelated.r);
  t_[0]->fail(Status(ErrorCode::aborted, "rank 0: stop"));
  // fail() returns only once nothing is referenced: all of rank 0's requests are done.
  EXPECT_TRUE(own_recv.r.done());
  EXPECT_TRUE(own_send.r.done());
  EXPECT_TRUE(peer_recv.r.done());
  EXPECT_EQ(own_recv.r.status.message(), "rank 0: stop");
  EXPECT_EQ(peer_recv.r.status.code(), ErrorCode::peer_lost);
  EXPECT_NE(peer_recv.r.status.message().find("rank 0 failed: aborted: rank 0: stop"),
            std::string::npos)
      << peer_recv.r.status.message();
  EXPECT_FALSE(unrelated.r.done());
  EXPECT_EQ(t_[0]->error().message(), "rank 0: stop");
  EXPECT_TRUE(t_[1]->error().ok());
  // Later posts end at once: on the failed rank with its error, toward it as peer_lost.
  Req late(Request::Kind::send, 1, 3, &x, 4, fp), toward(Request::Kind::send, 0, 3, &y, 4, fp);
  t_[0]->post_send(&late.r);
  t_[1]->post_send(&toward.r);
  EXPECT_TRUE(late.r.done());
  EXPECT_EQ(late.r.status.code(), ErrorCode::aborted);
  EXPECT_TRUE(toward.r.done());
  EXPECT_EQ(toward.r.status.code(), ErrorCode::peer_lost);
  t_[2]->fail(Status(ErrorCode::aborted, "rank 2: stop"));
  EXPECT_TRUE(unrelated.r.done());
  EXPECT_EQ(unrelated.r.status.code(), ErrorCode::peer_lost);
}

INSTANTIATE_TEST_SUITE_P(Eager, LocalTransportTest, ::testing::Values(0, 64, 1 << 20),
                         [](const auto& info) { return "eager_" + std::to_string(info.param); });

}  // namespace
}  // namespace weft
