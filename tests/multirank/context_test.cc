// Context (collective/context.h) and BufferPool (runtime/buffer_pool.h): waiting, the timeout
// text, errors returned as they are, clean-up when an algorithm returns early, scratch reuse.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "collective/collective.h"
#include "collective/context.h"
#include "runtime/buffer_pool.h"
#include "transport/local/local_transport.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Fingerprint allreduce_fp(uint64_t seq, uint64_t count) {
  CollectiveArgs a;
  a.kind = OpKind::allreduce;
  a.dtype = DataType::fp32;
  a.count = count;
  return make_fingerprint(a, seq);
}

TEST(Context, TimeoutNamesOperationAndPeer) {
  auto t = make_local_transports(4);
  BufferPool pool;
  Options o;
  o.timeout = milliseconds(200);
  const Fingerprint fp = allreduce_fp(17, 1048576);
  t[2]->begin_operation(fp);
  Context ctx(*t[2], o, fp, pool);
  float x = 0;
  const auto start = Clock::now();
  Status s = ctx.recv(3, 0, &x, 4);
  const auto took = Clock::now() - start;
  EXPECT_EQ(s.code(), ErrorCode::timeout);
  EXPECT_EQ(s.message(),
            "rank 2: allreduce #17 (f32 x 1048576, sum) Timed out after 0.2 s waiting for rank 3");
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, milliseconds(700));
}

TEST(Context, WholeSecondsAndSendRecv) {
  auto t = make_local_transports(2);
  BufferPool pool;
  Options o;
  o.timeout = std::chrono::seconds(1);
  const Fingerprint fp = allreduce_fp(1, 1);
  Context ctx(*t[0], o, fp, pool);
  int32_t a = 1, b = 0;
  Status s = ctx.sendrecv(1, &a, 4, 1, &b, 4, 0);
  EXPECT_EQ(s.message(), "rank 0: allreduce #1 (f32 x 1, sum) Timed out after 1 s waiting for rank 1");
}

TEST(Context, ExchangesAndReusesRequests) {
  auto t = make_local_transports(2);
  BufferPool pool;
  Options o;
  o.timeout = std::chrono::milliseconds::max();  // no deadline: must not overflow into the past
  const Fingerprint fp = allreduce_fp(3, 4);
  std::vector<Status> st(2);
  std::vector<int32_t> got(2);
  std::vector<std::thread> ths;
  for (int r = 0; r < 2; ++r) {
    ths.emplace_back([&, r] {
      Context ctx(*t[static_cast<size_t>(r)], o, fp, pool);
      int32_t acc = 0;
      for (int i = 0; i < 100 && st[static_cast<size_t>(r)].ok(); ++i) {
        int32_t mine = r * 1000 + i, theirs = -1;
        st[static_cast<size_t>(r)] = ctx.sendrecv(1 - r, &mine, 4, 1 - r, &theirs, 4, 0);
        acc += theirs;
      }
      got[static_cast<size_t>(r)] = acc;
    });
  }
  for (auto& th : ths) th.join();
  EXPECT_TRUE(st[0].ok()) << st[0].to_string();
  EXPECT_TRUE(st[1].ok()) << st[1].to_string();
  EXPECT_EQ(got[0], 1000 * 100 + 4950);
  EXPECT_EQ(got[1], 4950);
}

TEST(Context, ErrorStatusIsReturnedAsIs) {
  auto t = make_local_transports(2);
  BufferPool pool;
  const Options o;
  const Fingerprint fp = allreduce_fp(1, 1);
  Context ctx(*t[0], o, fp, pool);
  int32_t x = 0;
  Handle h = ctx.irecv(1, 0, &x, 4);
  t[0]->fail(Status(ErrorCode::aborted, "rank 0: told to stop"));
  Status s = ctx.wait(h);
  EXPECT_EQ(s.code(), ErrorCode::aborted);
  EXPECT_EQ(s.message(), "rank 0: told to stop");
}

// An algorithm that returns with messages still posted: the Context fails the transport, so no
// buffer stays referenced and the peer learns this rank stopped.
TEST(Context, EarlyReturnFailsTheTransport) {
  auto t = make_local_transports(2, {.eager_threshold = 0});
  BufferPool pool;
  const Options o;
  const Fingerprint fp = allreduce_fp(1, 1);
  int32_t x = 0, y = 0;
  {
    Context ctx(*t[0], o, fp, pool);
    (void)ctx.isend(1, 0, &x, 4);  // rendezvous: pending until rank 1 posts
    (void)ctx.irecv(1, 1, &y, 4);
  }
  EXPECT_EQ(t[0]->error().code(), ErrorCode::internal);
  EXPECT_NE(t[0]->error().message().find("2 messages still pending"), std::string::npos)
      << t[0]->error().message();
  Context peer(*t[1], o, fp, pool);
  Status s = peer.recv(0, 0, &y, 4);
  EXPECT_EQ(s.code(), ErrorCode::peer_lost) << s.to_string();
}

TEST(Context, WaitAllReturnsTheFirstErrorWithoutWaitingForTheRest) {
  auto t = make_local_transports(3);
  BufferPool pool;
  Options o;
  o.timeout = std::chrono::seconds(10);
  const Fingerprint fp = allreduce_fp(1, 1);
  int32_t x = 0, y = 0;
  const auto start = Clock::now();
  Status s;
  {
    Context ctx(*t[0], o, fp, pool);
    const Handle hs[2] = {ctx.irecv(1, 0, &x, 4), ctx.irecv(2, 0, &y, 4)};
    t[2]->fail(Status(ErrorCode::aborted, "rank 2: gone"));
    s = ctx.wait_all(hs);
  }
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  EXPECT_EQ(s.code(), ErrorCode::peer_lost) << s.to_string();
  // The error is recorded: the Context failed the transport with it on the way out.
  EXPECT_EQ(t[0]->error().code(), ErrorCode::peer_lost);
}

TEST(Context, ScratchComesFromThePoolAndGoesBack) {
  auto t = make_local_transports(1);
  BufferPool pool;
  const Options o;
  const Fingerprint fp = allreduce_fp(1, 1);
  void* first;
  {
    Context ctx(*t[0], o, fp, pool);
    first = ctx.scratch(3 << 20).value();
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(ctx.scratch(0).value(), nullptr);
    std::memset(first, 1, 3 << 20);
  }
  EXPECT_EQ(pool.cached_bytes(), BufferPool::class_size(3 << 20));
  Context ctx(*t[0], o, fp, pool);
  EXPECT_EQ(ctx.scratch((3 << 20) + 5).value(), first);  // same size class: the same buffer again
}

TEST(BufferPool, SizeClassesAlignmentAndReuse) {
  EXPECT_EQ(BufferPool::class_size(1), 64u);
  EXPECT_EQ(BufferPool::class_size(64), 64u);
  EXPECT_EQ(BufferPool::class_size(65), 128u);
  EXPECT_EQ(BufferPool::class_size((1 << 20) + 1), 2u << 20);
  BufferPool pool(2);
  EXPECT_EQ(pool.acquire(0), nullptr);
  void* a = pool.acquire(100);
  void* b = pool.acquire(100);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  void* huge = pool.acquire(2 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge) % (2 << 20), 0u);
  pool.release(a, 100);
  EXPECT_EQ(pool.acquire(120), a);  // 128-byte class
  pool.release(a, 120);
  pool.release(b, 100);
  pool.release(huge, 2 << 20);
  EXPECT_EQ(pool.cached_bytes(), 2 * 128u + (2u << 20));
  pool.trim();
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(BufferPool, RetentionIsBounded) {
  BufferPool pool(/*max_per_class=*/2, /*max_cached_bytes=*/4096);
  std::vector<void*> ps;
  for (int i = 0; i < 5; ++i) ps.push_back(pool.acquire(1000));
  for (void* p : ps) pool.release(p, 1000);
  EXPECT_EQ(pool.cached_bytes(), 2 * 1024u);  // two kept, three freed
  void* big = pool.acquire(8192);
  pool.release(big, 8192);                     // over the byte bound: freed
  EXPECT_EQ(pool.cached_bytes(), 2 * 1024u);
}

TEST(BufferPool, ManyThreads) {
  BufferPool pool;
  std::vector<std::thread> ths;
  std::atomic<int> bad{0};
  for (int i = 0; i < 4; ++i) {
    ths.emplace_back([&, i] {
      for (int k = 0; k < 2000; ++k) {
        const size_t bytes = 64u << ((i + k) % 8);
        auto* p = static_cast<unsigned char*>(pool.acquire(bytes));
        p[0] = static_cast<unsigned char>(i);
        p[bytes - 1] = static_cast<unsigned char>(i);
        std::this_thread::yield();
        if (p[0] != i || p[bytes - 1] != i) bad.fetch_add(1);
        pool.release(p, bytes);
      }
    });
  }
  for (auto& th : ths) th.join();
  EXPECT_EQ(bad.load(), 0);  // no buffer was handed to two threads at once
}

// Scratch sized by the caller's data may not fit in memory: the operation fails with an error
// naming the rank, the operation and the size (it used to abort the process), and the pool
// stays usable.
TEST(Context, ScratchBeyondMemoryIsTheOperationsError) {
  auto t = make_local_transports(2);
  BufferPool pool;
  Options o;
  const Fingerprint fp = allreduce_fp(3, 1);
  Context ctx(*t[1], o, fp, pool);
  const size_t huge = size_t{1} << 62;  // beyond any address space
  Result<std::byte*> r = ctx.scratch(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::io);
  EXPECT_EQ(r.status().message(),
            "rank 1: allreduce #3 (f32 x 1, sum): out of memory: cannot allocate "
            "4611686018427387904 bytes of scratch memory");
  EXPECT_EQ(pool.try_acquire(SIZE_MAX), nullptr);
  EXPECT_EQ(pool.try_acquire(huge), nullptr);
  Result<std::byte*> small = ctx.scratch(4096);
  ASSERT_TRUE(small.ok());
  EXPECT_NE(small.value(), nullptr);
  Result<std::byte*> none = ctx.scratch(0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), nullptr);
}

}  // namespace
}  // namespace weft
